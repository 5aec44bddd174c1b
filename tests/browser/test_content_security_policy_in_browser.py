"""Every kind of page a curator and an admin reach carries the site's Content-Security-Policy and
runs under it without one violation, its interactive parts still working: nothing on them needs an
inline script, an inline style or eval. And the policy does refuse what it must: an inline script
slipped into a page does not run, and the watch these tests keep sees it."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from playwright.sync_api import expect

from annotations.models import Group, Input, ReviewFlag
from annotations.services.flags import review_flag_create
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.bulk.jobs import bulk_job_create
from models_app.models import TrainingRun
from tests.browser.conftest import settled
from tests.models_pages.conftest import first_version, rejected_finetune  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

# Injected by Playwright before the page's own scripts. Scripts injected this way are not subject
# to the page's policy, so the watch can never be the thing it reports.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(
    `${location.pathname}: ${event.effectiveDirective} refused ${event.blockedURI || "inline"}`
    + ` (${event.sourceFile || "the page"}:${event.lineNumber})`
  );
});
"""


class PolicyWatch:
    """What the documents of one tab had refused under the policy: each document's violation
    events, gathered before the tab leaves it, and what Chromium reported on the console."""

    def __init__(self, page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.violations: list[str] = []
        self.reports: list[str] = []
        page.add_init_script(RECORD_VIOLATIONS)
        page.on("console", lambda message: message.type == "error" and self.report(message.text))
        page.on("pageerror", lambda error: self.report(str(error)))  # eval refused throws

    def report(self, text: str) -> None:
        if "Content Security Policy" in text:
            self.reports.append(text)

    def gather(self) -> None:
        """Keep this document's violations: the next one starts an empty list. The event is
        fired from a task of its own, so one task is let pass before the list is read."""
        self.violations += self.page.evaluate(
            "() => new Promise((done) => setTimeout(() => done(window.__cspViolations || []), 0))"
        )

    def visit(self, path: str, *, status: int = 200):
        self.gather()
        response = self.page.goto(f"{self.base_url}{path}")
        assert response.status == status, (path, response.status)
        assert_policy(response)
        self.page.wait_for_load_state("load")  # deferred scripts have run
        return response

    def log_in(self, path: str, username: str, password: str) -> None:
        self.visit(path)
        expect(self.page).to_have_url(f"{self.base_url}/accounts/login/?next={path}")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.gather()
        self.page.get_by_role("button", name="Log in").click()
        expect(self.page).to_have_url(f"{self.base_url}{path}")
        self.page.wait_for_load_state("load")

    def assert_nothing_refused(self) -> None:
        self.gather()
        assert self.violations == []
        assert self.reports == []


def assert_policy(response) -> None:
    assert response.header_value("content-security-policy") == (
        settings.SIAMWEB_CONTENT_SECURITY_POLICY
    ), response.url


@pytest.fixture
def watch(page, live_server) -> PolicyWatch:
    return PolicyWatch(page, live_server.url)


def hx_answer_from(path: str):
    """Matches the answer to an htmx request for ``path``."""
    return lambda response: (
        response.url.split("?")[0].endswith(path)
        and response.request.headers.get("hx-request") == "true"
    )


@pytest.mark.urls("tests.urls_with_a_failing_page")
@pytest.mark.usefixtures("rejected_finetune")
def test_a_curators_pages_run_under_the_policy_and_still_work(
    watch, page, curator, tiny_taxonomy, tmp_path
):
    inputs_submit(
        taxonomy=tiny_taxonomy,
        texts=["Senior Java Engineer", "Java Barista", "icu nurse"],
        source="api",
    )
    run = TrainingRun.objects.get(status=TrainingRun.Status.REJECTED)
    candidate = run.model_version
    history = [{"step": step, "validation_accuracy": accuracy}
               for step, accuracy in ((100, 0.6), (200, 0.7), (300, 0.72))]  # fmt: skip
    candidate.metrics = {**candidate.metrics, "history": history}
    candidate.save(update_fields=["metrics"])
    job = bulk_job_create(
        taxonomy=tiny_taxonomy,
        upload=io.BytesIO(b"ref,title\n1,icu nurse\n"),
        filename="ads.csv",
        column="title",
        user=curator,
        enqueue=False,
    )
    titles = tmp_path / "titles.csv"
    titles.write_text("ref,title\n1,Head Barista\n", encoding="utf-8")
    texts = tmp_path / "texts.csv"
    texts.write_text("text\nHead Barista\nCDL Truck Driver\n", encoding="utf-8")

    watch.log_in("/review/", "carla", "carla-pass-123")
    # The card: a search of every group, then a verdict, each answered into the page by htmx.
    expect(page.get_by_test_id("review-card")).to_be_visible()
    settled(page)
    page.get_by_test_id("group-search").fill("barist")
    expect(
        page.get_by_test_id("group-results").get_by_role("button", name="Baristas")
    ).to_be_visible()
    with page.expect_response(lambda response: response.url.endswith("/judge")) as verdict:
        page.get_by_test_id("confirm").click()
    assert_policy(verdict.value)
    expect(page.get_by_test_id("recent-verdict")).to_have_count(1)

    watch.visit("/review/queue/")
    expect(page.get_by_test_id("queue-row").first).to_be_visible()

    watch.visit("/inputs/")
    expect(page.get_by_test_id("input-row")).to_have_count(3)
    watch.visit(f"/inputs/{Input.objects.get(text='Senior Java Engineer').id}/")
    expect(page.get_by_test_id("input-detail")).to_be_visible()

    watch.visit("/inputs/upload/")
    page.get_by_label("File").set_input_files(str(texts))
    watch.gather()
    with page.expect_response(lambda response: response.request.method == "POST") as upload:
        page.get_by_role("button", name="Upload").click()
    assert_policy(upload.value)
    expect(page.get_by_test_id("new-inputs")).to_have_text("2")

    watch.visit("/bulk/")
    page.get_by_label("File", exact=True).set_input_files(str(titles))
    # bulk.js reads the chosen file's header in the browser.
    expect(page.get_by_test_id("bulk-columns")).to_have_text(
        "Columns in titles.csv: 'ref', 'title'"
    )
    with page.expect_response(hx_answer_from(f"/bulk/{job.id}/")) as poll:
        watch.visit(f"/bulk/{job.id}/")
        expect(page.get_by_test_id("job-status")).to_have_text("Queued")
    assert_policy(poll.value)

    watch.visit("/playground/")
    page.get_by_test_id("playground-text").press_sequentially("long haul truck")
    expect(page.get_by_test_id("ranked-group").first).to_have_attribute(
        "data-group-code", "53-3032"
    )

    watch.visit("/models/")
    expect(page.get_by_test_id("history").get_by_test_id("chart")).to_be_visible()
    watch.visit(f"/models/runs/{run.id}/")
    expect(page.get_by_test_id("training-curve").get_by_test_id("chart")).to_be_visible()
    expect(page.get_by_test_id("gate-decision")).to_have_text("reject")

    watch.visit("/accounts/token/")
    expect(page.get_by_test_id("api-token-card")).to_be_visible()

    # Swagger UI draws every operation from the schema, and one opens.
    with page.expect_response(lambda response: "script" in response.url) as script:
        watch.visit("/api/v1/docs")
    assert_policy(script.value)
    operations = page.locator("#swagger-ui .opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() > 10
    operations.first.locator(".opblock-summary").click()
    expect(operations.first.locator(".opblock-body")).to_be_visible()

    watch.visit("/audit/", status=403)
    expect(page.get_by_test_id("forbidden")).to_be_visible()
    watch.visit("/no-such-page/", status=404)
    expect(page.get_by_test_id("not-found")).to_be_visible()
    watch.visit("/fail/", status=500)
    expect(page.get_by_role("heading", name="Something broke on our side")).to_be_visible()
    # Styled by the site's stylesheet, now that nothing on the page is inline.
    assert page.evaluate("getComputedStyle(document.body).maxWidth") == "640px"

    watch.assert_nothing_refused()


def test_an_admins_pages_run_under_the_policy_and_still_work(
    watch, page, settings, admin_user, curator, other_curator, tiny_taxonomy
):
    settings.SIAMWEB_DOUBLE_REVIEW_PERCENT = 100
    disputed = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")[0]
    developers = Group.objects.get(taxonomy=tiny_taxonomy, code="15-1252")
    judgement_create(review_item=disputed, user=curator, verdict="confirm")
    judgement_create(review_item=disputed, user=other_curator, verdict="reassign", group=developers)
    pending = inputs_submit(
        taxonomy=tiny_taxonomy, texts=["Java Developer 1", "Java Developer 2"], source="api"
    )
    review_flag_create(
        review_item=pending[0], user=curator, kind=ReviewFlag.Kind.COMMENT, comment="A trainee?"
    )

    watch.visit("/admin/login/")
    expect(page.locator("#login-form")).to_be_visible()
    # Sent without its CSRF cookie: Django's refusal, in the site's own page.
    watch.visit("/accounts/login/")
    page.context.clear_cookies()
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("ada-pass-123")
    watch.gather()
    with page.expect_response(lambda response: response.request.method == "POST") as refused:
        page.get_by_role("button", name="Log in").click()
    assert refused.value.status == 403
    assert_policy(refused.value)
    expect(page.get_by_test_id("csrf-failure")).to_be_visible()

    watch.log_in("/taxonomies/", "ada", "ada-pass-123")
    expect(page.get_by_test_id("taxonomy-row")).to_have_count(1)
    watch.visit("/taxonomies/jobs/")
    page.get_by_test_id("group-search").fill("nurse")
    expect(page.get_by_test_id("group-row")).to_have_count(1)
    expect(page.get_by_test_id("group-row")).to_contain_text("Registered Nurses")
    watch.visit("/taxonomies/jobs/groups/35-3023/")
    expect(page.get_by_test_id("group-title")).to_contain_text("Baristas")
    page.get_by_test_id("member-row").first.get_by_test_id("move").click()
    expect(page.get_by_test_id("move-panel")).to_be_visible()

    watch.visit("/review/batch/jobs/")
    expect(page.get_by_test_id("batch-group").first).to_be_visible()
    watch.visit("/review/batch/jobs/15-1252/")
    tiles = page.locator("[data-tile]")
    expect(tiles).to_have_count(2)
    page.get_by_test_id("tile").first.click()
    expect(tiles.first).to_be_checked()

    watch.visit("/review/conflicts/")
    expect(page.get_by_test_id("conflict")).to_have_count(1)
    settled(page)
    page.get_by_test_id("conflict-group-search").fill("nurse")
    expect(page.get_by_role("button", name="Registered Nurses")).to_be_visible()
    watch.visit("/review/curators/")
    expect(page.get_by_test_id("curators-page")).to_be_visible()
    watch.visit("/review/flags/")
    expect(page.get_by_test_id("flag")).to_have_count(1)
    watch.visit("/audit/")
    expect(page.get_by_test_id("audit-event").first).to_be_visible()

    watch.visit("/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    # The admin's own script: the sidebar's filter hides the models that do not match.
    watch.visit("/admin/annotations/input/")
    expect(page.locator("#result_list")).to_be_visible()
    page.locator("#nav-filter").fill("taxonom")
    expect(page.locator("#nav-sidebar tr.model-input")).to_be_hidden()
    expect(page.locator("#nav-sidebar tr.model-taxonomy")).to_be_visible()
    watch.visit(f"/admin/annotations/input/{disputed.input_id}/change/")
    expect(page.locator("#input_form")).to_be_visible()

    watch.assert_nothing_refused()


def test_an_inline_script_slipped_into_a_page_is_refused_and_seen(watch, page, live_server):
    def slip_in(route) -> None:
        answer = route.fetch()  # the site's own answer, with its own header
        body = answer.text().replace(
            "</body>",
            '<script>window.slippedIn = true;</script><p style="color: red">red</p></body>',
        )
        route.fulfill(response=answer, body=body)

    page.route(f"{live_server.url}/accounts/login/", slip_in)
    watch.visit("/accounts/login/")

    assert page.evaluate("window.slippedIn") is None
    watch.gather()
    assert [v.split(" refused")[0] for v in watch.violations] == [
        "/accounts/login/: script-src-elem",
        "/accounts/login/: style-src-attr",
    ]
    assert len(watch.reports) == 2
