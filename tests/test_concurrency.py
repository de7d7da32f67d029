"""Many clients at once on a run that is still loading.

Sixteen threads request every route of `openapi.yaml` for a run whose trace (the 54 MB
V100 DDP trace from ../shared/traces, skipped without it) is still being parsed, each
repeating its round until every answer is final. What must hold:

- no 5xx, and each URL answers 202 (loading) until its first final answer, never 202 again
  afterwards; every later answer to that URL, from any thread, is byte-identical;
- no deadlock: every thread finishes within a bounded time (joined with a timeout);
- the file is parsed exactly once (`tb_plugin.python_api.profile.profile_from_bytes` counted), and
  each expensive derived result (the timeline index, the operator tree) is built once even
  when all threads ask for it at the same instant.
"""

import re
import shutil
import threading
import time
from collections import Counter, defaultdict

import tb_plugin.python_api.profile
from tb_plugin.views import common, timeline

from .helpers import PREFIX, SPEC, make_client, shared_trace, valid_query

THREADS = 16
DEADLINE_SECONDS = 240


def _big_run_queries():
    """URL of every route, aimed at run "big", worker "rank1"."""
    urls = []
    for path in sorted(SPEC["paths"]):
        query = valid_query(path)
        query = re.sub(r"\b(run|run_b)=[^&]*", r"\1=big", query)
        query = re.sub(r"\b(worker|worker_b)=[^&]*", r"\1=rank1", query)
        urls.append(f"{PREFIX}{path}?{query}" if query else f"{PREFIX}{path}")
    return urls


def test_many_clients_while_loading_get_consistent_answers_and_one_parse(tmp_path, monkeypatch):
    source = shared_trace("v100_ddp_nccl_memory")
    (tmp_path / "big").mkdir()
    shutil.copy(source, tmp_path / "big" / "rank1.pt.trace.json.gz")

    parses, builds = Counter(), Counter()
    real_parse = tb_plugin.python_api.profile.profile_from_bytes
    real_index, real_tree = timeline.TimelineIndex, common._build_operator_tree

    def counting_parse(data, display_path, progress, **kwargs):
        parses[display_path] += 1
        return real_parse(data, display_path, progress, **kwargs)

    class CountingIndex(real_index):
        def __init__(self, model):
            builds["timeline_index"] += 1
            super().__init__(model)

    def counting_tree(model):
        builds["operator_tree"] += 1
        return real_tree(model)

    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", counting_parse)
    monkeypatch.setattr(timeline, "TimelineIndex", CountingIndex)
    monkeypatch.setattr(common, "_build_operator_tree", counting_tree)

    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    urls = [u for u in _big_run_queries() if not u.endswith("/runs")]  # /runs reports progress: it changes
    answers = defaultdict(list)  # url -> [(order, status, body)]
    failures = []
    start = threading.Barrier(THREADS)
    deadline = time.monotonic() + DEADLINE_SECONDS
    tick = iter(range(10**9))
    tick_lock = threading.Lock()

    def client_thread(offset):
        from werkzeug.test import Client
        own = Client(client.application)  # one client per thread, as separate browsers would be
        pending = urls[offset:] + urls[:offset]  # each thread starts on a different route
        start.wait()
        try:
            while pending and time.monotonic() < deadline:
                still = []
                for url in pending:
                    with tick_lock:
                        asked = next(tick)
                    response = own.get(url)
                    with tick_lock:
                        answers[url].append((asked, next(tick), response.status_code, response.get_data()))
                    if response.status_code >= 500:
                        failures.append((url, response.status_code))
                    if response.status_code == 202:
                        still.append(url)
                pending = still
                if pending:
                    time.sleep(0.02)
            if pending:
                failures.append(("still loading at the deadline", pending[:3]))
        except Exception as exc:  # reported below, the thread must not die silently
            failures.append(("exception", repr(exc)))

    threads = [threading.Thread(target=client_thread, args=(i * len(urls) // THREADS,), daemon=True)
               for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, deadline + 30 - time.monotonic()))
    try:
        assert not [t for t in threads if t.is_alive()], "a client thread did not finish: deadlock?"
        assert failures == []
        saw_loading = 0
        for url, seen in answers.items():
            # (asked, answered) ticks: a 202 whose request was under way when another thread
            # got the 200 may be answered after it; one asked after a 200 came back may not.
            first_final = min(answered for _, answered, status, _ in seen if status != 202)
            late = [(asked, answered) for asked, answered, status, _ in seen if status == 202 and asked > first_final]
            assert late == [], (url, first_final, late[:3])
            finals = {body for _, _, status, body in seen if status != 202}
            assert len(finals) == 1, (url, len(finals))
            assert sum(status != 202 for _, _, status, _ in seen) >= THREADS, url  # every thread got the final answer
            saw_loading += any(status == 202 for _, _, status, _ in seen)
        assert saw_loading >= len(urls) // 2, "the run loaded before most routes were asked: not a loading test"
        assert list(parses.values()) == [1], parses
        assert builds["timeline_index"] == 1, builds
        assert builds["operator_tree"] == 1, builds
    finally:
        plugin.store.stop()
