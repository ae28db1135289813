"""axe-core, the accessibility checker, injected into a page from the npm package that
``tests/browser/package.json`` pins (``package-lock.json``; ``python3 dev.py test`` and ``.ci/run`` install it
with ``npm ci``). Nothing is fetched at run time: the script is read from ``tests/browser/node_modules``.

``axe_violations(page)`` runs axe on the page as it stands and returns its serious and critical
violations, one line per rule with the first elements it named. Swagger UI's own markup on
``/api/docs/`` is left out (``.swagger-ui``: a third-party stylesheet we do not restyle; docs/browser-tests.md).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import missing_part

AXE_JS = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
#: The impacts that fail a page (axe also reports "minor" and "moderate").
FAILING = ("serious", "critical")
#: WCAG 2.0/2.1 A and AA rules and axe's best practices.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

_RUN = """async ([tags, exclude]) => {
  const context = exclude.length ? {include: [document], exclude: exclude.map(s => [s])} : document;
  const result = await axe.run(context, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + (n.failureSummary ? ' — ' + n.failureSummary.split('\\n').slice(1, 2).join('') : ''))}));
}"""


def axe_source() -> str:
    """axe-core's script, or a skip (a failure under ``KVP_REQUIRE_REAL_PARTS=1``) when npm has not installed it."""
    if not AXE_JS.is_file():
        missing_part("axe-core is not installed (npm ci --prefix tests/browser; python3 dev.py test does it)")
    return AXE_JS.read_text(encoding="utf-8")


def axe_results(page, source: str, exclude: tuple[str, ...] = ()) -> list[dict]:
    """Every violation axe finds on ``page`` (all impacts), each ``{id, impact, help, nodes}``."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=source)
    return page.evaluate(_RUN, [TAGS, list(exclude)])


def axe_violations(page, source: str, exclude: tuple[str, ...] = (".swagger-ui",)) -> list[str]:
    """The serious and critical violations on ``page``, one readable line each ([] when none)."""
    return [f"{v['impact']} {v['id']} ({v['help']}): {'; '.join(v['nodes'][:4])}"
            for v in axe_results(page, source, exclude) if v["impact"] in FAILING]
