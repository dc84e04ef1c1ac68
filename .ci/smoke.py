"""Smoke test of `python3 dev.py run`: the pages and static files come from the production
server (gunicorn, WhiteNoise), then log in, launch a run of an example project from the
browser's forms over HTTP, and wait until the worker (embedded broker, no Redis) finishes it.
(.ci/run then checks that SIGTERM stops the server cleanly: exit status 0, the port closed.)

    python .ci/smoke.py http://127.0.0.1:8000 admin PASSWORD
"""

from __future__ import annotations

import http.cookiejar
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def check_production_server(base: str) -> None:
    """The login page and a static file answered by gunicorn, the file by WhiteNoise (Django's
    development server says ``WSGIServer/...`` and sends no CORS header for static files)."""
    for path in ("/login/", "/static/css/app.css"):
        with urllib.request.urlopen(base + path, timeout=30) as response:
            server = response.headers.get("Server", "")
            assert response.status == 200, f"{path}: {response.status}"
            assert server == "gunicorn", f"{path} came from {server!r}, not gunicorn"
            if path.startswith("/static/"):
                assert response.headers.get("Access-Control-Allow-Origin") == "*", (
                    f"{path} was not served by WhiteNoise"
                )
    print("pages and static files come from gunicorn + WhiteNoise")


def main(base: str, username: str, password: str) -> int:
    check_production_server(base)
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def get(path: str) -> tuple[int, str, str]:
        try:
            with opener.open(base + path, timeout=30) as response:
                return response.status, response.geturl(), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.geturl(), exc.read().decode()

    def post(path: str, data: dict[str, str]) -> tuple[int, str, str]:
        token = next(c.value for c in jar if c.name == "csrftoken")
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": token}).encode()
        request = urllib.request.Request(base + path, data=body, headers={"Referer": base + path})
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, response.geturl(), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.geturl(), exc.read().decode()

    get("/login/")
    status, url, _ = post("/login/", {"username": username, "password": password, "next": "/"})
    assert status == 200 and not url.endswith("/login/"), "login failed"
    _, _, home = get("/")
    launches = re.findall(r"/projects/(\d+)/launch/", home)
    assert launches, "no example project is registered on the home page"
    get(f"/projects/{launches[0]}/launch/")
    status, url, page = post(
        f"/projects/{launches[0]}/launch/",
        {"git_ref": "", "parallel": "2", "limit": "", "case_filter": ""},
    )
    match = re.search(r"/runs/(\d+)/", url)
    assert status == 200 and match, f"launch failed ({status} {url}): {page[:500]}"
    run_id = match.group(1)
    print(f"launched run {run_id}; waiting for the worker")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status, _, _ = get(f"/runs/{run_id}/progress/")
        if status == 286:
            break
        time.sleep(1)
    else:
        print("the run did not finish in 180 s")
        return 1
    _, _, detail = get(f"/runs/{run_id}/")
    final = re.search(r'data-status="(\w+)"', detail)
    print(f"run {run_id} finished: {final.group(1) if final else 'unknown status'}")
    return 0 if final and final.group(1) in {"passed", "failed"} else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
