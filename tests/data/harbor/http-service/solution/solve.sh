#!/bin/bash
cat > /app/server.py <<'PY'
from http.server import BaseHTTPRequestHandler, HTTPServer


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok" if self.path == "/health" else b"not found"
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("0.0.0.0", 8080), Health).serve_forever()
PY
nohup python3 /app/server.py > /tmp/server.log 2>&1 &
for i in $(seq 50); do curl -s --noproxy '*' http://127.0.0.1:8080/health && break; sleep 0.1; done
