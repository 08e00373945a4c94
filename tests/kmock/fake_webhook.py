#!/usr/bin/env python3
"""A tiny HTTPS mutating webhook, only for checking emulator.py itself (not the real webhook).

    python3 fake_webhook.py --port 0 --cert leaf.pem --key leaf.key [--mode patch|allow|deny|error|baduid]

Prints ``READY https://127.0.0.1:<port>`` and answers every POST with an
admission.k8s.io/v1 AdmissionReview.  In ``patch`` mode (default) the JSON patch adds the
annotation ``fake-webhook/seen=<operation>``, so a test can see that the mutation landed.
Standard library only.
"""

import argparse
import base64
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--cert', required=True)
    ap.add_argument('--key', required=True)
    ap.add_argument('--mode', choices=['patch', 'allow', 'deny', 'error', 'baduid'], default='patch')
    args = ap.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
            review = json.loads(body)
            req = review['request']
            print(f'fake-webhook: {self.path} {req["operation"]} {req.get("namespace")}/{req.get("name")} '
                  f'uid={req["uid"]}', file=sys.stderr, flush=True)
            if args.mode == 'error':
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b'boom')
                return
            resp = {'uid': req['uid'] if args.mode != 'baduid' else 'wrong', 'allowed': args.mode != 'deny'}
            if args.mode == 'deny':
                resp['status'] = {'code': 403, 'reason': 'Forbidden', 'message': 'fake webhook says no'}
            if args.mode == 'patch':
                obj = req['object']
                ops = []
                if 'annotations' not in obj.get('metadata', {}):
                    ops.append({'op': 'add', 'path': '/metadata/annotations', 'value': {}})
                ops.append({'op': 'add', 'path': '/metadata/annotations/fake-webhook~1seen', 'value': req['operation']})
                resp['patchType'] = 'JSONPatch'
                resp['patch'] = base64.b64encode(json.dumps(ops).encode()).decode()
                resp['warnings'] = ['fake webhook mutated this']
            out = json.dumps({'apiVersion': review.get('apiVersion', 'admission.k8s.io/v1'),
                              'kind': 'AdmissionReview', 'response': resp}).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(('127.0.0.1', args.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(f'READY https://127.0.0.1:{srv.server_address[1]}', flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
