#!/usr/bin/env python3
"""A Kubernetes API server that answers from recorded responses, for testing `reel jobs submit
--executor k8s` with the real kubectl where no cluster can run.

Discovery (/version, /api, /apis, their group versions) and OpenAPI v3 come from files in
RECORDINGS; server-side apply (PATCH with application/apply-patch+yaml) stores the object and
answers it as an API server does (uid, resourceVersion, managedFields); a GET of a Job answers
the recorded states RECORDINGS/jobs/SCENARIO/NN.json in turn (the last one from then on), where
SCENARIO is the Job's name up to its first '-', else the stored object; DELETE removes it.
Anything in namespace
"forbidden" is refused as RBAC refuses a user without the rights.

Every request is appended to LOG as one JSON line {method, path, query, content_type, body}.
Usage: k8s_api_replay.py RECORDINGS LOG   (prints the port it listens on, then serves)
"""
import http.server
import json
import os
import sys
import urllib.parse

RECORDINGS, LOG = sys.argv[1], sys.argv[2]
objects = {}   # path -> object
served = {}    # job path -> how many recorded states it has answered


def recorded(name):
    with open(os.path.join(RECORDINGS, name)) as f:
        return json.load(f)


DISCOVERY = {
    "/version": "version.json",
    "/api": "api.json",
    "/apis": "apis.json",
    "/api/v1": "api-v1.json",
    "/apis/batch/v1": "apis-batch-v1.json",
    "/apis/policy/v1": "apis-policy-v1.json",
    "/openapi/v3": "openapi-v3.json",
    "/openapi/v3/api/v1": "openapi-v3-api-v1.json",
    "/openapi/v3/apis/batch/v1": "openapi-v3-apis-batch-v1.json",
    "/openapi/v3/apis/policy/v1": "openapi-v3-apis-policy-v1.json",
}


def job_states(path):
    """The recorded states for the Job at `path`, [] when none are recorded for it."""
    name = path.rsplit("/", 1)[-1]
    folder = os.path.join(RECORDINGS, "jobs", name.split("-", 1)[0])
    if not os.path.isdir(folder):
        return []
    return [os.path.join("jobs", name.split("-", 1)[0], f) for f in sorted(os.listdir(folder))]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def not_found(self, path):
        self.reply(404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": f"{path} not found", "reason": "NotFound", "code": 404})

    def log_request_line(self, body):
        url = urllib.parse.urlsplit(self.path)
        with open(LOG, "a") as f:
            f.write(json.dumps({"method": self.command, "path": url.path,
                                "query": urllib.parse.parse_qs(url.query),
                                "content_type": self.headers.get("Content-Type", ""),
                                "body": body}) + "\n")
        return url.path

    def do_GET(self):
        path = self.log_request_line("")
        if path in DISCOVERY:
            return self.reply(200, recorded(DISCOVERY[path]))
        states = job_states(path) if "/jobs/" in path else []
        if states and path in objects:
            n = served.get(path, 0)
            served[path] = n + 1
            return self.reply(200, recorded(states[min(n, len(states) - 1)]))
        if path in objects:
            return self.reply(200, objects[path])
        self.not_found(path)

    def do_PATCH(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        path = self.log_request_line(body)
        namespace, plural = path.split("/namespaces/")[1].split("/")[:2]
        if namespace == "forbidden":  # as RBAC answers a user without the rights
            group = path.split("/apis/")[1].split("/")[0] if path.startswith("/apis/") else ""
            return self.reply(403, {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f'{plural} "{path.rsplit("/", 1)[-1]}" is forbidden: User "reel" cannot '
                           f'patch resource "{plural}" in API group "{group}" in the namespace '
                           f'"{namespace}"',
                "reason": "Forbidden", "details": {"name": path.rsplit("/", 1)[-1], "kind": plural},
                "code": 403})
        if self.headers.get("Content-Type") != "application/apply-patch+yaml":
            return self.reply(415, {"kind": "Status", "status": "Failure", "code": 415,
                                    "message": "only server-side apply is recorded"})
        obj = json.loads(body)  # kubectl sends JSON, which is YAML
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", path.split("/namespaces/")[1].split("/")[0])
        meta["uid"] = f"00000000-0000-4000-8000-{len(objects):012d}"
        meta["resourceVersion"] = str(1000 + len(objects))
        meta["creationTimestamp"] = "2026-12-05T10:00:00Z"
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        meta["managedFields"] = [{"manager": query.get("fieldManager", [""])[0],
                                  "operation": "Apply", "apiVersion": obj.get("apiVersion", "")}]
        created = path not in objects
        objects[path] = obj
        self.reply(201 if created else 200, obj)

    def do_DELETE(self):
        """kubectl delete TYPE,TYPE NAME: each object is deleted, or NotFound."""
        length = int(self.headers.get("Content-Length") or 0)  # DeleteOptions
        path = self.log_request_line(self.rfile.read(length).decode())
        if objects.pop(path, None) is None:
            return self.not_found(path)
        self.reply(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success", "details": {"name": path.rsplit("/", 1)[-1]}})

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
