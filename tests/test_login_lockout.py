"""Sign-ins are throttled (django-axes): after SIAMWEB_LOGIN_FAILURE_LIMIT (5) wrong passwords for
one username from one address, that pair is refused with a 429 page in the site's frame, the right
password included, for SIAMWEB_LOGIN_LOCKOUT_MINUTES (15) or until an admin unlocks it; the
admin's sign-in too. Other usernames and other addresses are not held up."""

from __future__ import annotations

from datetime import timedelta

from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


def sign_in(client: Client, username: str, password: str, url: str = LOGIN, **extra):
    return client.post(url, {"username": username, "password": password}, **extra)


def fail(client: Client, username: str, times: int, url: str = LOGIN, **extra) -> list[int]:
    return [sign_in(client, username, "wrong-password", url, **extra).status_code
            for _ in range(times)]  # fmt: skip


def test_a_curator_who_got_the_password_wrong_four_times_still_signs_in(curator):
    client = Client()
    assert fail(client, "carla", 4) == [200] * 4  # the form again, with its error
    assert sign_in(client, "carla", "carla-pass-123").status_code == 302


def test_the_fifth_failure_locks_the_username_here_even_with_the_right_password(curator):
    client = Client()
    assert fail(client, "carla", 5) == [200, 200, 200, 200, 429]
    page = sign_in(client, "carla", "carla-pass-123")
    assert page.status_code == 429
    assert "_auth_user_id" not in client.session
    html = page.content.decode()
    assert 'data-testid="login-locked-out"' in html
    assert "Try again in 15 minutes" in html
    assert 'data-testid="login-retry-at"' in html
    assert "An admin can unlock it sooner" in html
    assert '<header class="topbar">' in html  # the site's own frame
    assert page["Retry-After"] == "900"


def test_the_limit_and_the_wait_come_from_the_settings(curator, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_COOLOFF_TIME = timedelta(minutes=3)
    client = Client()
    assert fail(client, "carla", 2) == [200, 429]
    page = sign_in(client, "carla", "carla-pass-123")
    assert (page.status_code, page["Retry-After"]) == (429, "180")
    assert "Try again in 3 minutes" in page.content.decode()


def test_another_username_and_another_address_are_not_locked(curator, other_curator):
    fail(Client(), "carla", 5)
    assert sign_in(Client(), "oscar", "oscar-pass-123").status_code == 302
    elsewhere = Client(REMOTE_ADDR="192.0.2.7")
    assert sign_in(elsewhere, "carla", "carla-pass-123").status_code == 302


def test_the_admin_sign_in_is_locked_the_same_way(admin_user):
    client = Client()
    assert fail(client, "ada", 5, ADMIN_LOGIN)[-1] == 429
    page = sign_in(client, "ada", "ada-pass-123", ADMIN_LOGIN)
    assert page.status_code == 429
    assert 'data-testid="login-locked-out"' in page.content.decode()


def test_an_admin_unlocks_a_locked_username(curator):
    client = Client()
    fail(client, "carla", 5)
    assert AccessAttempt.objects.filter(username="carla").exists()
    call_command("axes_reset_username", "carla")
    assert sign_in(client, "carla", "carla-pass-123").status_code == 302


def test_a_lockout_ends_once_its_minutes_have_passed(curator, settings):
    client = Client()
    fail(client, "carla", 5)
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME)
    assert sign_in(client, "carla", "carla-pass-123").status_code == 302


def test_behind_a_proxy_the_address_it_forwards_is_the_one_locked(curator, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    settings.SIAMWEB_PROXY_SECRET = "s" * 32

    def via_proxy() -> Client:
        # Every request comes from the proxy, with its client's address forwarded and its secret.
        return Client(REMOTE_ADDR="10.0.0.1", HTTP_X_SIAMWEB_PROXY_SECRET="s" * 32)

    fail(via_proxy(), "carla", 5, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert AccessAttempt.objects.get().ip_address == "203.0.113.5"
    other = sign_in(via_proxy(), "carla", "carla-pass-123", HTTP_X_FORWARDED_FOR="198.51.100.9")
    assert other.status_code == 302
    same = sign_in(via_proxy(), "carla", "carla-pass-123", HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert same.status_code == 429


def test_a_forwarded_address_without_the_proxys_secret_is_not_believed(curator, settings):
    """gunicorn reached directly: a forged X-Forwarded-For once dodged the lockout."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    settings.SIAMWEB_PROXY_SECRET = "s" * 32
    for secret in ("", "wrong" * 8):
        AccessAttempt.objects.all().delete()
        forger = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_SIAMWEB_PROXY_SECRET=secret)
        statuses = [
            sign_in(forger, "carla", "guess", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code
            for n in range(6)
        ]
        assert statuses == [200] * 4 + [429] * 2
        assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.0.0.1"}


def test_without_a_proxy_a_forwarded_address_is_not_believed(curator):
    fail(Client(), "carla", 5, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert AccessAttempt.objects.get().ip_address == "127.0.0.1"
