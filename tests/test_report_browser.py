"""The report as a person sees it: rendered by headless Chromium (Debian's `chromium`; .ci/run installs it
where missing) at 1280 px, every folded section opened. The page must not run past the window, no two texts
of a chart may overlap, and no NaN or None may show; the screenshot is saved beside the report."""

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
WIDTH = 1280

# Run in the page once it has loaded: open every <details>, then list what runs past the window, every pair
# of visible texts in one SVG whose boxes overlap or come within 2 px side by side ('1,0002,000'; Vega hides
# a tick label it cannot fit with opacity 0), and the page's text; written into the page, where --dump-dom
# prints it.
PROBE = """<script>
window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const seen = el => { for (; el; el = el.parentElement) { if (getComputedStyle(el).opacity === '0') return false; } return true; };
  const wide = [...document.body.querySelectorAll('*')]
    .filter(el => el.getBoundingClientRect().right > window.innerWidth + 0.5)
    .map(el => `${el.tagName}: ${(el.textContent || '').trim().slice(0, 80)}`);
  const overlaps = [];
  document.querySelectorAll('svg').forEach(svg => {
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() && seen(t))
      .map(t => [t.textContent.trim(), t.getBoundingClientRect()]);
    texts.forEach(([a, p], i) => texts.slice(i + 1).forEach(([b, q]) => {
      const x = Math.min(p.right, q.right) - Math.max(p.left, q.left), y = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (x > -2 && y > 1) overlaps.push(`${a} / ${b}`);
    }));
  });
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({wide, overlaps, text: document.body.innerText});
  document.body.appendChild(out);
});
</script>"""


def chromium(*args: str) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def probe(page: Path) -> dict:
    """What the page looks like at WIDTH px in Chromium (PROBE's findings)."""
    probed = page.with_name("probe.html")
    probed.write_text(page.read_text() + PROBE)
    dom = chromium(f"--window-size={WIDTH},1000", "--dump-dom", probed.as_uri())
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
    seen = probe(page)
    chromium(f"--window-size={WIDTH},2000", f"--screenshot={out / 'screenshot.png'}", page.as_uri())
    assert (out / "screenshot.png").stat().st_size > 0
    assert seen["wide"] == [], seen["wide"][:5]
    assert seen["overlaps"] == [], seen["overlaps"][:10]
    words = re.findall(r"\b(NaN|nan|None)\b", seen["text"])
    assert not words, [seen["text"][max(m.start() - 80, 0):m.end() + 20] for m in re.finditer(r"\b(NaN|nan|None)\b", seen["text"])][:5]
    text = seen["text"]
    assert text.index("Your planned run") < text.index("my_cnn (yours") < text.index("disc (built-in)")
