"""The served app stays quiet (issue 14 item 14): `make run` and the shipped .streamlit/config.toml
start Streamlit without a file watcher, and the config is tracked by git, not ignored."""

import pathlib
import subprocess
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_shipped_config_has_no_file_watcher_and_is_tracked():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none" and config["server"]["headless"] is True
    assert config["browser"]["gatherUsageStats"] is False
    ignored = subprocess.run(["git", "check-ignore", "-q", ".streamlit/config.toml"], cwd=ROOT, check=False)
    assert ignored.returncode == 1  # 1: not ignored


def test_make_run_starts_without_a_file_watcher():
    makefile = (ROOT / "Makefile").read_text()
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "--server.fileWatcherType none" in run and "--server.address 127.0.0.1" in run


def test_every_chart_is_drawn_with_kvmems_template_not_streamlits_theme():
    # Streamlit's plotly theme is re-applied in the browser on every rerun (bench/README.md): the
    # pages draw through ui.common.chart, with theme=None and plots.template for the viewer's theme.
    import json

    from kvmem import plots
    from tests.ui.apptest import run

    at = run("app.py")
    charts = at.get("plotly_chart")
    assert charts
    for chart in charts:
        assert chart.proto.theme == ""  # theme=None
        assert json.loads(chart.proto.spec)["layout"]["template"] == plots.template(dark=False)
    direct = [path.name for path in (ROOT / "ui").glob("*.py")
              if path.name != "common.py" and "plotly_chart(" in path.read_text()]
    assert direct == []
