"""The report as a person sees it: rendered by headless Chromium (Debian's `chromium`; .ci/run installs it
where missing) at 1,400 px and on a 390-px phone, every folded section opened. The page must not run past the
window (a table wider than it scrolls in its own box), no figure may break across two lines ("~$0.⏎01"), no two
texts of a chart may overlap, and no NaN or None may show; the screenshots are saved beside the report."""

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from analysis_rows import planted_rows, row, user_cpu_rows, write

from crossover.analysis.__main__ import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTHS = (1400, 390)  # a desktop screen, a phone

# Run in the page once it has loaded: open every <details>, then list what runs past the window outside a box that
# scrolls within it, how wide the document is, every figure of the text (outside the charts) laid out on more than
# one line, every pair of visible texts in one SVG whose boxes overlap or come within 2 of the chart's px side by
# side ('1,0002,000'; Vega hides a tick label it cannot fit with opacity 0), and the page's text; written into the
# page that frames it (`framed`), where --dump-dom prints it.
PROBE = """<script>
window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const seen = el => { for (; el; el = el.parentElement) { if (getComputedStyle(el).opacity === '0') return false; } return true; };
  const past = el => el.getBoundingClientRect().right > window.innerWidth + 0.5;
  const scrolled = el => { for (el = el.parentElement; el; el = el.parentElement) {
    if (['auto', 'scroll'].includes(getComputedStyle(el).overflowX) && !past(el)) return true; } return false; };
  const wide = [...document.body.querySelectorAll('*')].filter(el => past(el) && !scrolled(el))
    .map(el => `${el.tagName}: ${(el.textContent || '').trim().slice(0, 80)}`);
  const broken = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node; (node = walk.nextNode());) {
    if (node.parentElement.closest('svg, #probe')) continue;
    for (const m of node.textContent.matchAll(/[~$±]*\\d+(?:[.,]\\d+)*(?:[-–]\\d+(?:[.,]\\d+)*)*%?/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(`${m[0]} in: ${node.textContent.trim().slice(0, 80)}`);
    }
  }
  const overlaps = [];
  document.querySelectorAll('svg').forEach(svg => {
    // the chart's own pixels: a chart shrunk to a phone's width brings its texts closer on the screen, not in the chart
    const scale = svg.getBoundingClientRect().width / svg.width.baseVal.value || 1;
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() && seen(t))
      .map(t => [t.textContent.trim(), t.getBoundingClientRect()]);
    texts.forEach(([a, p], i) => texts.slice(i + 1).forEach(([b, q]) => {
      const x = Math.min(p.right, q.right) - Math.max(p.left, q.left), y = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (x / scale > -2 && y / scale > 1) overlaps.push(`${a} / ${b}`);
    }));
  });
  const out = parent.document.createElement('pre');  // into the page that frames this one: --dump-dom prints that
  out.id = 'probe';
  out.textContent = JSON.stringify({wide, broken, overlaps, width: document.documentElement.scrollWidth,
                                  window: window.innerWidth, text: document.body.innerText});
  parent.document.body.appendChild(out);
});
</script>"""


def chromium(*args: str) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def framed(page: Path, width: int, script: str = "") -> Path:
    """A page showing `page` (and `script` run in it) in a frame `width` px wide, its window as a screen or a phone of
    that width gives it: Chromium's headless window is at least 500 px wide, whatever --window-size says."""
    host = page.with_name(f"at-{width}.html")
    shown = html.escape(page.read_text() + script, quote=True)
    host.write_text(f"<!doctype html><body style='margin:0'><iframe srcdoc=\"{shown}\" "
                    f"style='width:{width}px;height:2000px;border:0'></iframe>")
    return host


def probe(page: Path, width: int) -> dict:
    """What the page looks like at `width` px in Chromium (PROBE's findings)."""
    dom = chromium(f"--window-size={max(width, 500)},1000", "--dump-dom", framed(page, width, PROBE).as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)")
def test_the_report_of_your_model_and_a_built_in_reads_in_a_browser(tmp_path, capsys):
    mine = user_cpu_rows(tmp_path / "mine", "my_cnn")  # measured on the CPU alone
    skipped = {**row("disc", "cuda", [1.0]), "status": "error", "error": "skipped: predicted past 15% of it (--budget)",
               "depth": 9}
    builtins = write(planted_rows([10, 100, 1000, 10_000], lambda x: 1e-4 * x, lambda x: 0.05 + 1e-6 * x, epochs=4)
                     + [skipped], tmp_path / "builtins")
    out = tmp_path / "report"
    assert main(["report", str(mine), str(builtins), "--out", str(out), "--draws", "50",
                 "--epochs", "30", "--dataset-size", "50000", "--workload", "my_cnn"]) == 0
    capsys.readouterr()
    page = out / "index.html"
    for width in WIDTHS:
        seen = probe(page, width)
        chromium(f"--window-size={width},2000", f"--screenshot={out / f'screenshot-{width}.png'}",
                 framed(page, width).as_uri())
        assert (out / f"screenshot-{width}.png").stat().st_size > 0
        assert seen["width"] <= seen["window"] == width and seen["wide"] == [], (width, seen["width"], seen["wide"][:5])
        assert seen["broken"] == [], (width, seen["broken"][:5])
        assert seen["overlaps"] == [], (width, seen["overlaps"][:10])
    words = re.findall(r"\b(NaN|nan|None)\b", seen["text"])
    assert not words, [seen["text"][max(m.start() - 80, 0):m.end() + 20] for m in re.finditer(r"\b(NaN|nan|None)\b", seen["text"])][:5]
    text = seen["text"]
    assert text.index("Your planned run") < text.index("my_cnn (yours") < text.index("disc (built-in)")
