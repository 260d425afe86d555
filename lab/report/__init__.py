"""A run folder → run_dir/report/index.html: one self-contained page comparing the two machines.

    render(run_dir) -> Path                       # summary.json/series.json are made first if missing
    screenshot(html, png) -> Screenshot           # headless Chromium: a PNG and the page's console errors
    python3 -m lab.report runs/<run-id> [--screenshot]

The page works offline: no script, no web font, no request to any host. The charts are PNG images
made with matplotlib and embedded as data: URIs; links to the run's own files are relative
(../jmeter/default/dashboard/index.html …), so the run folder can be moved or zipped whole.
The run folder's layout (any part may be missing, the report says which): lab/runfolder.py.

    page.py         render(): the page from templates/report.html.j2 (+ report.css), Jinja2, autoescaped
    formatting.py   the template's filters: numbers, sizes, ratios, dates
    charts.py       the charts in page order (CHARTS); JMeter's; charts_pcp.py, charts_gc.py the others
    plotting.py     Chart, ChartContext, the matplotlib figure helper and the two chart shapes
    screenshot.py   headless Chromium
"""
from lab.report.page import render
from lab.report.screenshot import Screenshot, chromium, screenshot

__all__ = ["Screenshot", "chromium", "render", "screenshot"]
