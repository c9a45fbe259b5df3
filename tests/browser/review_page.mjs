// Drives the reviewer page (GET /review) in headless chromium through
// playwright-core, as a reviewer would: pastes the key, sees the cases,
// edits and approves one, rejects another with a comment, and looks at a
// hostile one. Run by tests/browser/test_review_page.py, which seeded the
// cases and checks the decisions through the API afterwards.
//
// env: CI_URL (the daemon), CI_KEY (a tenant's key), CI_CHROMIUM (the
// browser), CI_CASES (JSON {approve, reject, hostile: review ids}).
// Prints one JSON line of what it saw; exits non-zero on a failed check.
import { chromium } from "playwright-core";

const url = process.env.CI_URL;
const key = process.env.CI_KEY;
const cases = JSON.parse(process.env.CI_CASES);
const seen = { dialogs: [], errors: [], console: [] };

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

const browser = await chromium.launch({
  executablePath: process.env.CI_CHROMIUM,
  headless: true,
  // Root in a container has no user namespaces for chromium's own sandbox;
  // the page under test is ours, on loopback.
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"],
  timeout: 60000,
});
let rc = 0;
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  page.on("dialog", async (d) => { seen.dialogs.push(d.message()); await d.dismiss(); });
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("console", (m) => seen.console.push(m.type() + ": " + m.text()));

  await page.goto(url + "/review");
  // No key yet: the list is refused, and the page says so.
  await page.waitForFunction(() => /refused/.test(document.getElementById("status").textContent));
  await page.fill("#key", key);
  await page.click("#keysave");
  const card = (id) => page.locator(`article.case[data-review-id="${id}"]`);
  await card(cases.approve).waitFor();
  await card(cases.reject).waitFor();
  await card(cases.hostile).waitFor();
  // The key is in sessionStorage, not in a cookie or localStorage.
  seen.stored = await page.evaluate(() => ({
    session: sessionStorage.getItem("ci-review-key") !== null,
    local: localStorage.length,
    cookie: document.cookie,
  }));

  // Two attempts side by side: one row, two boxes next to each other.
  const a = card(cases.approve);
  const boxes = a.locator(".attempt");
  check((await boxes.count()) === 2, "two attempts shown");
  const b0 = await boxes.nth(0).boundingBox(), b1 = await boxes.nth(1).boundingBox();
  seen.side_by_side = b0 && b1 && Math.abs(b0.y - b1.y) < 2 && b1.x > b0.x + b0.width - 1;
  check(seen.side_by_side, "attempts side by side");
  seen.attempt_codes = await boxes.locator("pre.code").allTextContents();
  seen.attempt_errors = await boxes.locator(".error").allTextContents();
  seen.sources = await boxes.locator("h3").allTextContents();
  // The textarea holds the last attempt's code; edit it and approve.
  const ta = a.locator("textarea.edit");
  seen.textarea_before = await ta.inputValue();
  await ta.fill("print('edited in the browser')\n");
  await a.locator("input.comment").fill("looks right now");
  await a.locator("button.approve").click();
  await a.locator(".outcome.ok").waitFor();
  seen.approve_outcome = await a.locator(".outcome").textContent();

  // Reject: without a comment the page refuses; with one it goes.
  const r = card(cases.reject);
  await r.locator("button.reject").click();
  seen.reject_without_comment = await r.locator(".outcome").textContent();
  await r.locator("input.comment").fill("wrong approach: use the CSV reader");
  await r.locator("button.reject").click();
  await r.locator(".outcome.ok").waitFor();
  seen.reject_outcome = await r.locator(".outcome").textContent();

  // The hostile case: its code and error render as text, make no element
  // and run nothing.
  const h = card(cases.hostile);
  seen.hostile_code = await h.locator("pre.code").first().textContent();
  seen.hostile_error = await h.locator(".error").first().textContent();
  seen.hostile_textarea = await h.locator("textarea.edit").inputValue();
  seen.hostile_elements = await page.evaluate(() => ({
    img: document.querySelectorAll("img").length,
    script: document.querySelectorAll("script").length,
    iframe: document.querySelectorAll("iframe, object, embed").length,
    pwned: window.__pwned === undefined ? null : window.__pwned,
    title: document.title,
  }));

  // Reload: the decided cases are gone from the pending list.
  await page.click("#reload");
  await page.waitForFunction(() => /pending case/.test(document.getElementById("status").textContent));
  seen.after_reload = await page.locator("article.case").evaluateAll(
    (els) => els.map((e) => e.getAttribute("data-review-id")));
} catch (e) {
  seen.failure = String(e && e.stack || e);
  rc = 1;
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
process.exit(rc);
