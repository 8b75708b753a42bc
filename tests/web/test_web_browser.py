"""A real browser on ``registry serve``: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) loads "Resolve a run", fills the form, submits it and reads the answer from
the page; finds a profile by its facets; and sees an import made while the server runs on
every page at the next request. Screenshots go beside the test's files (and to
``$REGISTRY_TEST_SCREENSHOTS`` when set), for a person to look at."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Chromium's switches for a test: no sandbox (root in CI), no network of its own.
SWITCHES = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--window-size=1280,1600")


def _required() -> bool:
    return any(os.environ.get(v, "") in ("1", "true", "yes") for v in (
        "REGISTRY_TEST_REQUIRE_BROWSER", "REGISTRY_TEST_REQUIRE_POSTGRES"))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        reason = (f"no {' or '.join(missing)}: apt-get install -y chromium chromium-driver "
                  "(.ci/run does)")
        if _required():
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="registry-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for switch in (*SWITCHES, f"--user-data-dir={profile}"):
        options.add_argument(switch)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _screenshot(driver, tmp_path: Path, name: str) -> Path:
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, min(max(height + 40, 800), 6000))
    path = tmp_path / name
    driver.save_screenshot(str(path))
    keep = os.environ.get("REGISTRY_TEST_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / name)
    return path


def _follow(driver, element, css: str):
    """Click ``element`` and wait for ``css`` on the NEW page: the old page's elements
    (a first answer shown before the form was filled) must not be read as the new one's."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 30).until(seen.staleness_of(page))
    return _wait(driver, css)


def _wait(driver, css: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 30).until(seen.presence_of_element_located((By.CSS_SELECTOR,
                                                                              css)))


def _fallback_run(path: Path) -> dict:
    """A run of the generated registry whose category has no profile in any set, while one
    set holds coding for its key: the resolver falls back to coding's profile."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("""
            SELECT a.model, a.speculative_method, a.num_spec_tokens, a.thinking,
                   a.acceptance_length, a.profile_set, a.profile
            FROM acceptance_profiles a
            WHERE a.category = 'coding'
              AND (SELECT COUNT(*) FROM acceptance_profiles b WHERE b.model = a.model
                   AND b.speculative_method = a.speculative_method
                   AND b.num_spec_tokens = a.num_spec_tokens AND b.thinking = a.thinking
                   AND b.category IN ('coding', 'chat')) = 1
            ORDER BY a.profile LIMIT 1""").fetchone()
        assert row is not None, "the generated registry has a run that falls back"
        return dict(row)
    finally:
        conn.close()


def _said(driver, column: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(
        By.CSS_SELECTOR, f"#registry-answer tr[data-column={column}] td.value").text


def _fill(driver, url: str, form_values: dict[str, str]):
    """Open the form at ``url``, fill it and submit it; the answer's first cell."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    form = _wait(driver, "form.sql")
    for name, value in form_values.items():
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    return _follow(driver, form.find_element(By.CSS_SELECTOR,
                                             "input[type=submit], button[type=submit]"),
                   "#registry-answer tr[data-column=answer] td.value")


def test_the_empty_form_greets_without_an_error(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server.url}/{server.path.stem}/resolve")
    form = _wait(browser, "form.sql")
    names = {f.get_attribute("name") for f in form.find_elements(By.CSS_SELECTOR, "input")}
    assert {"hardware", "as_of"} <= names
    assert browser.find_elements(By.CSS_SELECTOR, "#registry-answer") == []
    assert "invalid_request" not in browser.find_element(By.TAG_NAME, "body").text
    state = browser.find_element(By.CSS_SELECTOR, "p.registry-state").text
    assert state.startswith("The registry as of its latest revision, ")


def test_an_import_while_serving_is_seen_at_the_next_request(registry_file, browser,
                                                             tmp_path):
    """The import lands between two loads of each page: the second shows it, with no error,
    and the resolve form answers from the new revision as registry resolve does."""
    import json

    from selenium.webdriver.common.by import By

    from tests.helpers import Server, free_port, run_cli, web_sets

    path = tmp_path / "served.db"
    shutil.copy(registry_file, path)
    running = Server(path, free_port())
    try:
        running.wait()
        base = f"{running.url}/{path.stem}"
        pages = ("set_revisions", "acceptance_profiles", "profile_history", "set_overview")
        for page in pages:
            browser.get(f"{base}/{page}?profile_set=alpha")
            _wait(browser, "p.registry-state")
        before = browser.find_element(By.CSS_SELECTOR, "p.registry-state").text
        sets = tmp_path / "sets"
        sets.mkdir()
        (sets / "alpha.yaml").write_text(web_sets(8)["alpha"], encoding="utf-8")
        assert run_cli("-d", str(path), "import", str(sets)).exit_code == 0
        for page in pages:
            browser.get(f"{base}/{page}?profile_set=alpha")
            state = _wait(browser, "p.registry-state").text
            assert "alpha revision 2 (updated)" in state and state != before, page
            body = browser.find_element(By.TAG_NAME, "body").text
            assert "malformed" not in body and "Error" not in browser.title, page
        revisions = {td.text for td in browser.find_elements(By.CSS_SELECTOR, "td.col-revision")}
        browser.get(f"{base}/set_revisions?profile_set=alpha")
        _wait(browser, "p.registry-state")
        shown = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "td.col-revision")]
        assert shown == ["2", "1"], (shown, revisions)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            model, method, k, thinking, category = conn.execute(
                "SELECT model, speculative_method, num_spec_tokens, thinking, category "
                "FROM acceptance_profiles WHERE profile_set = 'alpha' ORDER BY profile "
                "LIMIT 1").fetchone()
        finally:
            conn.close()
        answer = _fill(browser, f"{base}/resolve", {
            "model": model, "method": method, "k": str(k), "thinking": thinking,
            "category": category, "set": "alpha", "hardware": "B300"})
        assert answer.text == "resolved"
        cli = json.loads(run_cli("-d", str(path), "resolve", "--model", model, "--method",
                                 method, "--k", str(k), "--thinking", thinking, "--category",
                                 category, "--set", "alpha", "--json").stdout)
        assert (_said(browser, "revision"), float(_said(browser, "acceptance_length"))) == (
            "2", cli["acceptance_length"])
        assert "alpha revision 2" in browser.find_element(By.CSS_SELECTOR,
                                                          "p.registry-state").text
        _screenshot(browser, tmp_path, "web-after-import.png")
    finally:
        running.stop()


def test_resolve_a_run_from_the_form(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    run = _fallback_run(server.path)
    browser.get(f"{server.url}/{server.path.stem}/resolve")
    form = _wait(browser, "form.sql")
    for name, value in (("model", run["model"]), ("method", run["speculative_method"]),
                        ("k", str(run["num_spec_tokens"])), ("thinking", run["thinking"]),
                        ("category", "chat"), ("fallback", "coding")):
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    _follow(browser, form.find_element(By.CSS_SELECTOR, "input[type=submit], button[type=submit]"),
            "#registry-answer")

    def said(column: str) -> str:
        return browser.find_element(
            By.CSS_SELECTOR, f"#registry-answer tr[data-column={column}] td.value").text

    assert said("answer") == "resolved"
    assert said("profile") == run["profile"]
    assert said("profile_set") == run["profile_set"]
    assert float(said("acceptance_length")) == run["acceptance_length"]
    assert (said("fallback_replaced"), said("fallback_category")) == ("chat", "coding")
    assert "used the fallback category 'coding'" in said("message")
    meaning = browser.find_element(
        By.CSS_SELECTOR, "#registry-answer tr[data-column=answer] td.meaning").text
    assert "why the run is refused" in meaning
    picture = _wait(browser, "figure.registry-picture img")
    browser.execute_script("arguments[0].scrollIntoView()", picture)
    loaded = browser.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth", picture)
    assert loaded == 1200
    assert _screenshot(browser, tmp_path, "web-resolve.png").stat().st_size > 10_000


def test_a_refused_run_says_why(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    run = _fallback_run(server.path)
    browser.get(f"{server.url}/{server.path.stem}/resolve")
    form = _wait(browser, "form.sql")
    for name, value in (("model", run["model"]), ("method", run["speculative_method"]),
                        ("k", str(run["num_spec_tokens"])), ("thinking", run["thinking"]),
                        ("category", "chat")):
        form.find_element(By.NAME, name).send_keys(value)
    answer = _follow(browser, form.find_element(By.CSS_SELECTOR,
                                                "input[type=submit], button[type=submit]"),
                     "#registry-answer tr[data-column=answer] td.value")
    assert answer.text == "no_match"
    message = browser.find_element(
        By.CSS_SELECTOR, "#registry-answer tr[data-column=message] td.value").text
    assert message.startswith(f"no profile {run['model']}/") and "no fallback_category" in message
    assert browser.find_elements(By.CSS_SELECTOR, "figure.registry-picture") == []
    _screenshot(browser, tmp_path, "web-refused.png")


def test_find_a_profile_by_its_facets(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(f"{server.url}/{server.path.stem}/acceptance_profiles")
    fold = _wait(browser, "details.registry-columns")
    assert "columns means" in fold.text
    _follow(browser, browser.find_element(By.CSS_SELECTOR, 'a[href*="model=model-b"]'),
            "figure.registry-picture img")
    shown = {td.text for td in browser.find_elements(By.CSS_SELECTOR, "td.col-model")}
    assert shown == {"model-b"}
    _follow(browser, browser.find_element(By.CSS_SELECTOR, 'a[href*="speculative_method=mtp"]'),
            "figure.registry-picture img")
    methods = {td.text for td in browser.find_elements(By.CSS_SELECTOR,
                                                       "td.col-speculative_method")}
    models = {td.text for td in browser.find_elements(By.CSS_SELECTOR, "td.col-model")}
    assert (models, methods) == ({"model-b"}, {"mtp"})
    header = browser.find_element(By.CSS_SELECTOR, "th.col-acceptance_length")
    assert "Unit: tokens per step." in header.get_attribute("title")
    _screenshot(browser, tmp_path, "web-profiles.png")
