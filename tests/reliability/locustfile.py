"""Locust: sustained usage ingestion against a server on loopback (run by test_load.py).

Each user posts batches of LOCUST_BATCH fresh events (ids unique per user and request)
with the bearer token in LOCUST_TOKEN, back to back. A 2xx counts its `accepted` events;
anything else is a failure. At the end the acknowledged count goes to LOCUST_ACK_FILE,
for the test to compare with the rows stored.
"""

import json
import os
import uuid

from locust import FastHttpUser, constant, events, task

BATCH = int(os.environ.get("LOCUST_BATCH", "100"))
ACKNOWLEDGED = {"events": 0, "requests": 0, "failures": 0, "server_errors": 0}


class Ingestor(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.prefix = uuid.uuid4().hex[:12]
        self.sent = 0
        self.headers = {
            "Authorization": f"Bearer {os.environ['LOCUST_TOKEN']}",
            "Content-Type": "application/json",
        }

    @task
    def ingest(self) -> None:
        batch = [
            {
                "id": f"load-{self.prefix}-{self.sent + i}",
                "time": "2026-03-04T12:00:00Z",
                "tenant": "tenant-a",
                "model": "llama-70b",
                "input_tokens": 100,
                "cached_tokens": 0,
                "output_tokens": 20,
            }
            for i in range(BATCH)
        ]
        self.sent += BATCH
        with self.client.post(
            "/api/v1/usage/events",
            data=json.dumps(batch),
            headers=self.headers,
            name="POST /api/v1/usage/events",
            catch_response=True,
        ) as response:
            ACKNOWLEDGED["requests"] += 1
            if response.status_code == 200:
                ACKNOWLEDGED["events"] += response.json()["accepted"]
                response.success()
            else:
                ACKNOWLEDGED["failures"] += 1
                ACKNOWLEDGED["server_errors"] += response.status_code >= 500
                response.failure(f"{response.status_code}: {response.text[:200]}")


@events.quitting.add_listener
def _write_acknowledged(environment, **kwargs) -> None:
    path = os.environ.get("LOCUST_ACK_FILE")
    if path:
        with open(path, "w") as out:
            json.dump(ACKNOWLEDGED, out)
