"""Drives the web page in headless Chromium (Selenium with Debian's chromedriver) for
tests/web_page.rs. Usage: browser.py URL TOKEN SCREENSHOT_PATH. Opens URL, waits for
the session's screen (signing in with TOKEN when the page asks, unless it is -), prints one JSON line with what the page shows, then, on each line of
stdin, performs a step and prints its JSON answer:

  text            the screen's text, rows joined by newlines, trailing blanks trimmed
  wait_line LINE  waits (20 s at most) until a row reads LINE; then the screen's text
  commands TEXT   waits (20 s at most) until a line of "Last commands" contains TEXT; then
                  those lines
  status TEXT     waits (20 s at most) until the session's status line contains TEXT; then
                  the status line and the screen's text
  take / release  clicks "Take keyboard" / "Release keyboard"
  type TEXT       types TEXT (\\n as Enter) into the screen
  shot R C        a screenshot; the colour at the centre of row R, column C
  quit
"""

import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait


def main():
    url, token, shot_path = sys.argv[1], sys.argv[2], sys.argv[3]
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"]:
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    # The driver's path given, so Selenium Manager never looks for one on the network.
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(url)
        WebDriverWait(driver, 30).until(
            lambda d: d.find_element(By.ID, "token").is_displayed()
            or d.find_elements(By.CSS_SELECTOR, "#screen .row"))
        if token != "-" and driver.find_element(By.ID, "token").is_displayed():
            driver.find_element(By.ID, "token").send_keys(token + "\n")
        WebDriverWait(driver, 30).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#screen .row"))
        answer({"cookie_visible_to_script": "ptyd_web" in driver.execute_script("return document.cookie"),
                "url": driver.current_url})
        for line in sys.stdin:
            verb, _, rest = line.rstrip("\n").partition(" ")
            if verb == "text":
                answer({"text": screen_text(driver)})
            elif verb == "wait_line":
                try:
                    WebDriverWait(driver, 20).until(
                        lambda d: rest in screen_text(d).split("\n"))
                except TimeoutException:
                    pass
                answer({"text": screen_text(driver)})
            elif verb == "commands":
                try:
                    WebDriverWait(driver, 20).until(
                        lambda d: any(rest in line for line in command_lines(d)))
                except TimeoutException:
                    pass
                answer({"commands": command_lines(driver)})
            elif verb == "status":
                try:
                    WebDriverWait(driver, 20).until(
                        lambda d: rest in d.find_element(By.ID, "status").text)
                except TimeoutException:
                    pass
                answer({"status": driver.find_element(By.ID, "status").text,
                        "text": screen_text(driver)})
            elif verb in ("take", "release"):
                button = driver.find_element(By.ID, verb)
                WebDriverWait(driver, 30).until(lambda d: button.is_displayed() and button.is_enabled())
                button.click()
                other = "release" if verb == "take" else "take"
                WebDriverWait(driver, 30).until(
                    lambda d: d.find_element(By.ID, other).is_displayed())
                answer({"ok": True})
            elif verb == "type":
                screen = driver.find_element(By.ID, "screen")
                screen.click()
                parts = rest.split("\\n")
                for i, part in enumerate(parts):
                    screen.send_keys(part)
                    if i < len(parts) - 1:
                        screen.send_keys(Keys.ENTER)
                answer({"ok": True})
            elif verb == "shot":
                row, col = (int(v) for v in rest.split())
                answer(shot(driver, shot_path, row, col))
            elif verb == "quit":
                break
    finally:
        driver.quit()


def answer(value):
    print(json.dumps(value), flush=True)


def screen_text(driver):
    # Read in one script: the page replaces the rows as the screen changes.
    lines = driver.execute_script(
        "return [...document.querySelectorAll('#screen .row')].map(r => r.textContent)")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def command_lines(driver):
    return driver.execute_script(
        "return [...document.querySelectorAll('#commands li')].map(li => li.textContent)")


def shot(driver, path, row, col):
    from PIL import Image

    rect = driver.execute_script(
        """const rows = document.querySelectorAll('#screen .row');
           const r = rows[arguments[0]].getBoundingClientRect();
           const probe = document.createElement('span');
           probe.textContent = 'M'.repeat(10);
           rows[arguments[0]].append(probe);
           const w = probe.getBoundingClientRect().width / 10;
           probe.remove();
           return {x: r.left, y: r.top, h: r.height, w, dpr: window.devicePixelRatio};""",
        row)
    driver.save_screenshot(path)
    image = Image.open(path).convert("RGB")
    x = (rect["x"] + (col + 0.5) * rect["w"]) * rect["dpr"]
    y = (rect["y"] + rect["h"] / 2) * rect["dpr"]
    return {"rgb": list(image.getpixel((int(x), int(y)))), "cell": rect}


if __name__ == "__main__":
    main()
