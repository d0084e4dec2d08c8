"""The whole plan as one document: inputs, results, the engine's lines, the launch command and the
sources of the model and GPU entries, as JSON and Markdown (kvmem.report).

    report(model, gpu=..., context=..., engine="vllm") -> Report   # kvmem.fit's arguments
    Report.to_dict(), .to_json(), .to_markdown()
    rerun_report(data) -> Report        # the JSON (text, dict or a path) run again: the same numbers

(The package is ``export``, not ``report``: ``kvmem.report`` is the function.) Modules:
document (the Report, its inputs as plain data and back), markdown (the Markdown text).
"""

from .document import FORMAT, Report, report, rerun_report

__all__ = ["FORMAT", "Report", "report", "rerun_report"]
