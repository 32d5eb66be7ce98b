"""A worker that must run on one pod at a time.

redislock's agent starts it once its pod leads and stops it (SIGTERM) when
leadership ends, so the loop below runs on one pod of the Deployment at a
time. It needs nothing of redislock; it asks the agent's /leader only to
print the fencing token, which a real worker would pass along with each
write to a store that can refuse a stale writer.
"""

import json
import os
import signal
import sys
import time
import urllib.request


def stop(signum, frame):
    print("worker: leadership ended, stopping", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
pod = os.environ.get("POD_NAME", "this pod")
leader_url = os.environ.get("REDISLOCK_LEADER_URL", "http://127.0.0.1:8090/leader")
try:
    with urllib.request.urlopen(leader_url, timeout=5) as r:
        token = json.load(r).get("fencingToken")
except OSError as e:
    token = f"unknown ({e})"
print(f"worker: leading on {pod} with fencing token {token}", flush=True)

n = 0
while True:
    n += 1
    print(f"worker: tick {n} on {pod}", flush=True)
    time.sleep(1)
