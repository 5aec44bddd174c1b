"""Key to next card in Chromium: how long a curator waits between pressing a verdict key and
seeing the next card, with the card ranked live (this checkout) and, with ``--before <commit>``,
as another commit serves it (a worktree of it, same database, same machine, same run).

Seeds a scratch PostgreSQL database with O*NET and the shipped model live, and real JobBERT
vacancy titles (dev-unseen) as pending inputs predicted by it. For each checkout: gunicorn with
the product's config (two workers), headless Chromium logged in as a curator on /review/, and
``--cards`` verdicts pressed one after another ("a": confirm the top group), each timed in the
page from the keydown to the moment the next card is in the document (a MutationObserver; the
first ``--warm`` are left out). Prints p50 / p90 / max and writes bench/results/card_keys.json.

    .venv/bin/python bench/card_keys.py [--cards 60] [--before <commit> [--rounds 2]]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg

_pg.scratch_database(broker="memory://")

from annotations.services.accounts import user_ensure  # noqa: E402
from annotations.services.review.inputs import inputs_submit  # noqa: E402
from bench._servers import free_port, start_gunicorn, stop_gunicorn  # noqa: E402
from bench.jobbert_data import jobbert_split  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# In the page: the time from a keydown to the next card (another data-item-id) in the document.
WATCH = """() => {
  window.keyToCard = [];
  let pressed = null;
  let shown = document.querySelector('[data-testid=review-card]')?.dataset.itemId;
  document.addEventListener('keydown', () => { pressed = performance.now(); }, true);
  new MutationObserver(() => {
    const id = document.querySelector('[data-testid=review-card]')?.dataset.itemId;
    if (id && id !== shown && pressed !== null) {
      window.keyToCard.push(performance.now() - pressed);
      pressed = null;
    }
    if (id) shown = id;
  }).observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def press_through(browser, url: str, cards: int) -> list[float]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{url}/accounts/login/?next=/review/")
    page.get_by_label("Username").fill("bench-curator")
    page.get_by_label("Password").fill("bench-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{url}/review/")
    page.wait_for_load_state("load")
    page.evaluate(WATCH)
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    for _ in range(cards):
        shown = page.get_by_test_id("review-card").get_attribute("data-item-id")
        page.keyboard.press("a")
        page.wait_for_function(
            "id => { const card = document.querySelector('[data-testid=review-card]');"
            " return card && card.dataset.itemId !== id; }",
            arg=shown,
        )
        # As a person would: the next key once the swap has settled (htmx wires the new card's
        # forms then); the timing above stops when the card is in the document.
        page.wait_for_function(
            "() => !document.querySelector('.htmx-added, .htmx-settling, .htmx-swapping,"
            " .htmx-request')"
        )
    found = page.evaluate("window.keyToCard")
    if found is None:
        raise RuntimeError(f"the page was loaded again while judging ({navigations}): no timings")
    context.close()
    return found


def summary(values: list[float]) -> dict[str, float]:
    return {
        "cards": len(values),
        "p50_ms": round(_pg.percentile(values, 0.5), 1),
        "p90_ms": round(_pg.percentile(values, 0.9), 1),
        "max_ms": round(max(values), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=int, default=60)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--before", help="a commit to serve too, for a before-and-after")
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="with --before: serve both this many times, in turn (before first, then this "
        "checkout first, ...), so that neither always runs first on a machine that drifts",
    )  # fmt: skip
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    taxonomy = _pg.onet_live()
    user_ensure(username="bench-curator", password="bench-pass-123", admin=False)
    dev, _ = jobbert_split()
    titles = list(dict.fromkeys(row.text for row in dev))
    runs = [("this checkout (live ranking)", ROOT)]
    worktree = None
    if args.before:
        worktree = Path(tempfile.mkdtemp(prefix="card-keys-")) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.before],
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        runs.insert(0, (f"{args.before} (before)", worktree))
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    runs = [run for turn in range(args.rounds) for run in (runs if turn % 2 == 0 else runs[::-1])]
    need = (args.cards + args.warm + 5) * len(runs)
    inputs_submit(taxonomy=taxonomy, texts=titles[:need], source="api")
    _pg.vacuum_analyze()
    report = {"machine": _pg.machine(), "load_before": _pg.load_average(), "runs": {}}
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            for name, root in runs:
                # As a deployment does: the pages' scripts (htmx) served by whitenoise.
                subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput"],
                               cwd=root, check=True, capture_output=True)  # fmt: skip
                port = free_port()
                config = "deploy/gunicorn.conf.py"
                server = start_gunicorn(
                    port=port, workers=2, threads=2, torch_threads=1, config=config, root=root
                )
                try:
                    found = press_through(
                        browser, f"http://127.0.0.1:{port}", args.cards + args.warm
                    )
                finally:
                    stop_gunicorn(server)
                run = report["runs"].setdefault(name, {"all_ms": [], "p50_ms_by_turn": []})
                run["all_ms"] += found[args.warm :]
                run["p50_ms_by_turn"].append(round(_pg.percentile(found[args.warm :], 0.5), 1))
            browser.close()
    finally:
        if worktree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT,
                           capture_output=True)  # fmt: skip
    report["load_after"] = _pg.load_average()
    for run in report["runs"].values():
        run.update(summary(run["all_ms"]))
    rows = [{"checkout": name, **{k: v for k, v in run.items() if k != "all_ms"}}
            for name, run in report["runs"].items()]  # fmt: skip
    _pg.print_table(rows, ["checkout", "cards", "p50_ms", "p90_ms", "max_ms", "p50_ms_by_turn"])
    _pg.write_results("card_keys", report)


if __name__ == "__main__":
    main()
