// A real browser for the status page tests: Debian's chromium, headless,
// driven by playwright-core. Reads one JSON command per line on stdin,
// answers one JSON line on stdout ({"ok": value} or {"error": message}).
//   {"do": "goto", "url": …}            {"do": "text", "selector": …}
//   {"do": "click", "selector": …}      {"do": "wait_text", "selector": …, "contains": …, "timeout": ms}
//   {"do": "select", "selector": …, "value": …}   {"do": "fill", "selector": …, "value": …}
//   {"do": "screenshot", "path": …}     {"do": "cookies"}
//   {"do": "fetch", "url": …, "method": …, "body": …}   (from the page, with its cookies)
//   {"do": "eval", "script": …}      (an expression in the page; a promise is awaited)
//   {"do": "close"}
import { chromium } from "playwright-core";
import readline from "node:readline";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const context = await browser.newContext({ viewport: { width: 1100, height: 1400 } });
const page = await context.newPage();
const consoleErrors = [];
page.on("pageerror", (e) => consoleErrors.push(String(e)));

async function run(c) {
  switch (c.do) {
    case "goto": await page.goto(c.url, { waitUntil: "domcontentloaded" }); return page.url();
    case "text": return await page.locator(c.selector).first().textContent();
    case "visible": return await page.locator(c.selector).first().isVisible();
    case "click": await page.locator(c.selector).first().click(); return true;
    case "select": await page.locator(c.selector).first().selectOption(c.value); return true;
    case "fill": await page.locator(c.selector).first().fill(c.value); return true;
    case "wait_text": {
      const deadline = Date.now() + (c.timeout || 10000);
      let last = null;
      while (Date.now() < deadline) {
        last = await page.locator(c.selector).first().textContent().catch(() => null);
        if (last !== null && last.includes(c.contains)) return last;
        await page.waitForTimeout(50);
      }
      throw new Error(`${c.selector} never contained ${JSON.stringify(c.contains)}; last: ${JSON.stringify(last)}`);
    }
    case "screenshot": await page.screenshot({ path: c.path, fullPage: true }); return c.path;
    case "cookies": return await context.cookies();
    case "fetch": return await page.evaluate(async ({ url, method, body }) => {
      const r = await fetch(url, { method, headers: { "Content-Type": "application/json" }, body });
      return { status: r.status, body: await r.text() };
    }, c);
    case "eval": return (await page.evaluate(c.script)) ?? null;
    case "errors": return consoleErrors;
    case "close": await browser.close(); return true;
    default: throw new Error(`unknown command ${c.do}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  try {
    process.stdout.write(JSON.stringify({ ok: await run(c) }) + "\n");
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String(e.message || e) }) + "\n");
  }
  if (c.do === "close") break;
}
process.exit(0);
