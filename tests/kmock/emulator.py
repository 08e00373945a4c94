#!/usr/bin/env python3
"""A Kubernetes/OpenShift API stand-in for the bootimage-webhook integration tests.

Built on the PyPI package ``kmock`` (0.8): its aiohttp ``Server``, its request
parsing and its discovery endpoints (``/api``, ``/apis``, ``/apis/<g>/<v>``,
``/version``) are used as they are.  kmock's own object store
(``KubernetesEmulator``) is NOT used, because it never bumps
``resourceVersion``, has no selectors, no PUT, no metadata-only responses, no
server-side apply and no admission webhooks.  This file keeps its own store
on top of ``kmock.KubernetesScaffold`` instead.  See README.md beside it.

Usage:
    python3 emulator.py --port PORT --seed SEED.json
        [--webhook-url URL --webhook-ca CA.pem] [--no-machineconfiguration]

Prints exactly one line ``READY http://127.0.0.1:<port>`` on stdout once it
serves; everything else goes to stderr.  SIGTERM/SIGINT stop it with exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime
import json
import os
import re
import signal
import ssl
import sys
import time
import traceback
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import aiohttp
import aiohttp.web
import jsonpatch
import jsonpointer
import kmock
from kmock._internal import parsing as kparsing  # path -> group/version/plural/namespace/name

# --------------------------------------------------------------------------------------------
# Resources
# --------------------------------------------------------------------------------------------

CORE_EVENT_FIELDS = {
    'involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name', 'involvedObject.uid',
    'involvedObject.apiVersion', 'involvedObject.resourceVersion', 'involvedObject.fieldPath',
    'reason', 'reportingComponent', 'source', 'type',
}
EVENTS_V1_FIELDS = {
    'regarding.kind', 'regarding.namespace', 'regarding.name', 'regarding.uid',
    'regarding.apiVersion', 'regarding.resourceVersion', 'regarding.fieldPath',
    'reason', 'reportingController', 'type',
}
# Field selector label -> dotted path in the object, where it is not the label itself.
FIELD_ALIASES = {'source': 'source.component'}


@dataclass(frozen=True)
class Res:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False          # has a /status subresource (main endpoint ignores .status)
    crd: bool = False             # behaves like a CustomResource (no SMP, RV required on PUT, ...)
    fields: frozenset = frozenset()  # extra field-selector labels beyond metadata.name/namespace
    short: tuple = ()

    @property
    def api_version(self) -> str:
        return f'{self.group}/{self.version}' if self.group else self.version

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def qualified(self) -> str:
        """As in apiserver messages: ``configmaps`` or ``machinesets.machine.openshift.io``."""
        return f'{self.plural}.{self.group}' if self.group else self.plural


BASE_RESOURCES = [
    Res('', 'v1', 'configmaps', 'ConfigMap', True, short=('cm',)),
    Res('', 'v1', 'secrets', 'Secret', True, fields=frozenset({'type'})),
    Res('', 'v1', 'events', 'Event', True, fields=frozenset(CORE_EVENT_FIELDS), short=('ev',)),
    Res('', 'v1', 'nodes', 'Node', False, status=True, fields=frozenset({'spec.unschedulable'}), short=('no',)),
    Res('', 'v1', 'namespaces', 'Namespace', False, status=True, fields=frozenset({'status.phase'}), short=('ns',)),
    Res('events.k8s.io', 'v1', 'events', 'Event', True, fields=frozenset(EVENTS_V1_FIELDS), short=('ev',)),
    Res('coordination.k8s.io', 'v1', 'leases', 'Lease', True),
    Res('machine.openshift.io', 'v1beta1', 'machinesets', 'MachineSet', True, status=True, crd=True),
    Res('machineconfiguration.openshift.io', 'v1', 'machineconfigpools', 'MachineConfigPool', False,
        status=True, crd=True, short=('mcp',)),
    Res('machineconfiguration.openshift.io', 'v1', 'machineconfigs', 'MachineConfig', False,
        crd=True, short=('mc',)),
    Res('config.openshift.io', 'v1', 'infrastructures', 'Infrastructure', False, status=True, crd=True),
    Res('config.openshift.io', 'v1', 'clusterversions', 'ClusterVersion', False, status=True, crd=True),
]
MACHINECONFIGURATIONS = Res('operator.openshift.io', 'v1', 'machineconfigurations', 'MachineConfiguration',
                            False, status=True, crd=True)
WEBHOOK_RESOURCE = ('machine.openshift.io', 'v1beta1', 'machinesets')

VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']
META_SKIP = {'uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields',
             'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink'}

MERGE = 'application/merge-patch+json'
JSONPATCH = 'application/json-patch+json'
STRATEGIC = 'application/strategic-merge-patch+json'
APPLY = 'application/apply-patch+yaml'


def parse_extra_resource(spec: str) -> Res:
    """``GROUP/VERSION/PLURAL=Kind[,namespaced][,status][,crd]`` (core: ``v1/pods=Pod,namespaced``)."""
    path, _, rest = spec.partition('=')
    parts = path.strip('/').split('/')
    if len(parts) == 2:
        group, version, plural = '', parts[0], parts[1]
    elif len(parts) == 3:
        group, version, plural = parts
    else:
        raise SystemExit(f'bad --extra-resource {spec!r}')
    kind, *flags = rest.split(',')
    if not kind:
        raise SystemExit(f'bad --extra-resource {spec!r}: no Kind')
    return Res(group, version, plural, kind, 'namespaced' in flags, status='status' in flags,
               crd='crd' in flags or bool(group and not group.endswith('k8s.io')))


# --------------------------------------------------------------------------------------------
# Errors (always rendered as a meta/v1 Status, like the real apiserver)
# --------------------------------------------------------------------------------------------

class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict:
        st = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure',
              'message': self.message, 'reason': self.reason, 'code': self.code}
        if self.details is not None:
            st['details'] = self.details
        return st


def _details(res: Res, name: str | None) -> dict:
    d = {'kind': res.plural}
    if name:
        d['name'] = name
    if res.group:
        d['group'] = res.group
    return d


def not_found(res: Res, name: str) -> ApiError:
    return ApiError(404, 'NotFound', f'{res.qualified} "{name}" not found', _details(res, name))


def already_exists(res: Res, name: str) -> ApiError:
    return ApiError(409, 'AlreadyExists', f'{res.qualified} "{name}" already exists', _details(res, name))


def conflict(res: Res, name: str, why: str = 'the object has been modified; please apply your changes '
                                              'to the latest version and try again') -> ApiError:
    return ApiError(409, 'Conflict', f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}',
                    _details(res, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, 'BadRequest', message)


def invalid(res: Res, name: str, message: str) -> ApiError:
    return ApiError(422, 'Invalid', f'{res.kind} "{name}" is invalid: {message}', _details(res, name))


# The modern kube-apiserver (aggregator notfoundhandler) answers unknown API paths like this.
UNKNOWN_PATH = ApiError(404, 'NotFound', 'the server could not find the requested resource', {})


# --------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------

_KEY = r'[A-Za-z0-9][-A-Za-z0-9_./]*'
_VAL = r'[-A-Za-z0-9_.]*'


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ''
    for ch in s:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_label_selector(s: str | None) -> list[tuple]:
    if not s:
        return []
    reqs = []
    for raw in _split_top(s):
        p = raw.strip()
        if m := re.fullmatch(rf'!\s*({_KEY})', p):
            reqs.append(('!', m[1], None))
        elif m := re.fullmatch(rf'({_KEY})\s+(in|notin)\s*\(([^)]*)\)', p):
            vals = {v.strip() for v in m[3].split(',')}
            reqs.append((m[2], m[1], vals))
        elif m := re.fullmatch(rf'({_KEY})\s*(==|=|!=|>|<)\s*({_VAL})', p):
            if m[2] in '<>' and not re.fullmatch(r'-?\d+', m[3]):
                raise bad_request(f'unable to parse requirement: for \'gt\', \'lt\' operators, '
                                  f'the value must be an integer: {p!r}')
            reqs.append(({'==': '='}.get(m[2], m[2]), m[1], m[3]))
        elif m := re.fullmatch(rf'({_KEY})', p):
            reqs.append(('exists', m[1], None))
        else:
            raise bad_request(f'unable to parse requirement: invalid label selector {s!r} at {p!r}')
    return reqs


def labels_match(reqs: list[tuple], labels: dict | None) -> bool:
    labels = labels or {}
    for op, key, val in reqs:
        have = key in labels
        cur = labels.get(key)
        ok = {
            'exists': lambda: have,
            '!': lambda: not have,
            '=': lambda: have and cur == val,
            '!=': lambda: not have or cur != val,
            'in': lambda: have and cur in val,
            'notin': lambda: not have or cur not in val,
            '>': lambda: have and re.fullmatch(r'-?\d+', cur or '') is not None and int(cur) > int(val),
            '<': lambda: have and re.fullmatch(r'-?\d+', cur or '') is not None and int(cur) < int(val),
        }[op]()
        if not ok:
            return False
    return True


def parse_field_selector(s: str | None, res: Res) -> list[tuple]:
    if not s:
        return []
    reqs = []
    for raw in s.split(','):
        p = raw.strip()
        m = re.fullmatch(r'([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)', p)
        if not m:
            raise bad_request(f'invalid selector: {s!r}; can\'t understand {p!r}')
        label, op, val = m[1], m[2], m[3]
        if label not in ('metadata.name', 'metadata.namespace') and label not in res.fields:
            raise bad_request(f'field label not supported: {label}')
        reqs.append((FIELD_ALIASES.get(label, label), '!=' if op == '!=' else '=', val))
    return reqs


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split('.'):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def fields_match(reqs: list[tuple], obj: dict) -> bool:
    for path, op, val in reqs:
        cur = _dig(obj, path)
        cur = '' if cur is None else (json.dumps(cur) if isinstance(cur, bool) else str(cur))
        if (cur == val) != (op == '='):
            return False
    return True


# --------------------------------------------------------------------------------------------
# Object helpers
# --------------------------------------------------------------------------------------------

def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def meta(obj: dict) -> dict:
    return obj.setdefault('metadata', {})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def without_bookkeeping(obj: dict | None) -> dict | None:
    """The object minus what the server itself maintains; used for no-op detection."""
    if obj is None:
        return None
    o = copy.deepcopy(obj)
    m = o.get('metadata', {})
    for k in ('resourceVersion', 'managedFields', 'generation'):
        m.pop(k, None)
    return o


def spec_part(obj: dict | None) -> dict:
    """Everything except metadata and status: a change here bumps metadata.generation."""
    return {k: v for k, v in (obj or {}).items() if k not in ('metadata', 'status', 'apiVersion', 'kind')}


def leaf_paths(obj: Any, prefix: tuple = ()) -> dict[tuple, Any]:
    """Field paths as SSA would own them (dicts recurse; lists and scalars are atomic leaves)."""
    out: dict[tuple, Any] = {}
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            p = prefix + (k,)
            if p in (('apiVersion',), ('kind',)):
                continue
            if len(p) == 2 and p[0] == 'metadata' and p[1] in META_SKIP | {'name', 'namespace'}:
                continue
            out.update(leaf_paths(v, p))
    elif prefix:
        out[prefix] = obj
    return out


def get_path(obj: Any, path: tuple) -> Any:
    for k in path:
        if not isinstance(obj, dict) or k not in obj:
            return _MISSING
        obj = obj[k]
    return obj


def del_path(obj: dict, path: tuple) -> None:
    stack = []
    cur = obj
    for k in path[:-1]:
        if not isinstance(cur, dict) or k not in cur:
            return
        stack.append((cur, k))
        cur = cur[k]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    # prune emptied parents (but never metadata itself)
    for parent, k in reversed(stack):
        if isinstance(parent[k], dict) and not parent[k] and k != 'metadata':
            parent.pop(k)
        else:
            break


_MISSING = object()


def as_metadata(obj: dict) -> dict:
    return {'kind': 'PartialObjectMetadata', 'apiVersion': 'meta.k8s.io/v1',
            'metadata': copy.deepcopy(obj.get('metadata', {}))}


def wants_metadata(accept: str) -> bool:
    return 'as=PartialObjectMetadata' in (accept or '')


# --------------------------------------------------------------------------------------------
# The emulator
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)  # hashed by identity: kept in a set
class Sub:
    res_key: tuple
    queue: asyncio.Queue


@dataclass
class Fault:
    method: str | None
    path: re.Pattern | None
    code: int
    reason: str
    message: str
    times: int | None  # None: forever
    hits: int = 0


@dataclass
class Opts:
    webhook_url: str | None = None
    webhook_ca: str | None = None
    webhook_name: str = 'bootimage-webhook.test'
    webhook_timeout: float = 10.0
    webhook_failure_policy: str = 'Ignore'
    bump_on_noop: bool = False
    bookmark_interval: float = 0.0
    state_file: str | None = None
    verbose: bool = False


class Emulator(kmock.KubernetesScaffold):
    """kmock's scaffold (discovery + Status errors) with a real-ish object store in front of it."""

    def setup(self, resources: list[Res], opts: Opts) -> None:
        # attrs-defined base class: keep our state in plain attributes set after construction.
        self.res_list = list(resources)
        self.by_key = {r.key: r for r in self.res_list}
        self.by_gvk = {(r.api_version, r.kind): r for r in self.res_list}
        self.opts = opts
        self.objects: dict[tuple, dict] = {}
        self.owners: dict[tuple, dict[tuple[str, str], set]] = {}  # obj key -> (manager, op) -> paths
        self.rv = time.time_ns() // 1000  # microseconds: grows across restarts of the process
        self.floor_rv = self.rv           # watches from an older RV get 410 Gone
        self.log: deque = deque(maxlen=50000)  # (rv, res_key, type, new, old)
        self.subs: set[Sub] = set()
        self.req_log: list[dict] = []
        self.webhook_calls: list[dict] = []
        self.faults: list[Fault] = []
        self.http: aiohttp.ClientSession | None = None
        self.stopping = False
        for r in self.res_list:
            self.resources[kmock.resource(r.group, r.version, r.plural)] = kmock.ResourceInfo(
                kind=r.kind, namespaced=r.namespaced, singular=r.kind.lower(), verbs=VERBS,
                shortnames=r.short, subresources=['status'] if r.status else [])

    # ---------------------------------------------------------------- discovery tweaks
    async def _serve_api(self, request):  # type: ignore[override]
        return {'kind': 'APIVersions', 'versions': ['v1'],
                'serverAddressByClientCIDRs': [{'clientCIDR': '0.0.0.0/0', 'serverAddress': '127.0.0.1'}]}

    async def _serve_version(self, request):  # type: ignore[override]
        out = await super()._serve_version(request)
        if isinstance(out, dict) and out.get('groupVersion', '').startswith('/'):
            out['groupVersion'] = out['groupVersion'][1:]  # core is "v1", not "/v1"
        return out

    async def _serve_server_version(self, request):  # type: ignore[override]
        return {'major': '1', 'minor': '33', 'gitVersion': 'v1.33.0-kmock-emulator',
                'gitCommit': '0000000000000000000000000000000000000000', 'gitTreeState': 'clean',
                'buildDate': '2026-01-01T00:00:00Z', 'goVersion': 'go1.24', 'compiler': 'gc',
                'platform': 'linux/amd64'}

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, kmock.KubernetesNotFoundError):
            return self._status_response(UNKNOWN_PATH)
        print(f'emulator: internal error: {exc!r}\n{traceback.format_exc()}', file=sys.stderr, flush=True)
        return self._status_response(ApiError(500, 'InternalError', f'Internal error occurred: {exc!r}'))

    @staticmethod
    def _status_response(err: ApiError) -> aiohttp.web.Response:
        return aiohttp.web.json_response(err.status(), status=err.code)

    # ---------------------------------------------------------------- seeding / state
    def res_for(self, obj: dict) -> Res:
        r = self.by_gvk.get((obj.get('apiVersion'), obj.get('kind')))
        if r is None:
            raise bad_request(f'no resource is served for apiVersion={obj.get("apiVersion")!r} '
                              f'kind={obj.get("kind")!r}')
        return r

    def key_for(self, r: Res, obj: dict) -> tuple:
        m = obj.get('metadata') or {}
        name = m.get('name')
        if not name:
            raise bad_request('metadata.name is required')
        ns = m.get('namespace') if r.namespaced else None
        if r.namespaced and not ns:
            raise bad_request(f'{r.kind} {name!r} is namespaced: metadata.namespace is required')
        if not r.namespaced:
            m.pop('namespace', None)
        return (r.key, ns, name)

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def load_seed(self, objs: list[dict], skip: set[tuple[str, str]] = frozenset()) -> None:
        for obj in objs:
            if (obj.get('apiVersion'), obj.get('kind')) in skip:
                print(f'emulator: seed: skipping {obj.get("kind")} {obj.get("metadata", {}).get("name")!r}: '
                      f'its resource is not served', file=sys.stderr)
                continue
            r = self.res_for(obj)
            key = self.key_for(r, obj)
            m = meta(obj)
            m.setdefault('uid', str(uuid.uuid4()))
            m.setdefault('creationTimestamp', now_rfc3339())
            m.setdefault('generation', 1)
            if 'resourceVersion' not in m:
                m['resourceVersion'] = str(self.next_rv())
            self.objects[key] = obj
        self.floor_rv = self.rv

    def load_state(self, path: str) -> None:
        with open(path) as f:
            st = json.load(f)
        for obj in st['objects']:
            r = self.res_for(obj)
            self.objects[self.key_for(r, obj)] = obj
        self.rv = max(self.rv, int(st['rv']))
        self.floor_rv = int(st['rv'])  # a watch from the last RV before the restart may resume

    def save_state(self) -> None:
        if not self.opts.state_file:
            return
        tmp = self.opts.state_file + '.tmp'
        with open(tmp, 'w') as f:
            json.dump({'rv': self.rv, 'objects': list(self.objects.values())}, f)
        os.replace(tmp, self.opts.state_file)

    # ---------------------------------------------------------------- store primitives
    def publish(self, r: Res, typ: str, new: dict, old: dict | None) -> None:
        rv = int(new['metadata']['resourceVersion'])
        ev = (rv, r.key, typ, copy.deepcopy(new), copy.deepcopy(old) if old is not None else None)
        self.log.append(ev)
        for sub in list(self.subs):
            if sub.res_key == r.key:
                sub.queue.put_nowait(ev)
        self.save_state()

    def store(self, r: Res, key: tuple, new: dict, old: dict | None) -> dict:
        """Store new (its RV already set); finalize deletion when deletionTimestamp and no finalizers."""
        m = new['metadata']
        if m.get('deletionTimestamp') and not m.get('finalizers'):
            self.objects.pop(key, None)
            self.owners.pop(key, None)
            self.publish(r, 'DELETED', new, old)
        else:
            self.objects[key] = new
            self.publish(r, 'ADDED' if old is None else 'MODIFIED', new, old)
        return new

    def hard_delete(self, r: Res, key: tuple) -> dict:
        old = self.objects.pop(key)
        self.owners.pop(key, None)
        gone = copy.deepcopy(old)
        gone['metadata']['resourceVersion'] = str(self.next_rv())
        self.publish(r, 'DELETED', gone, old)
        return gone

    # ---------------------------------------------------------------- HTTP entry
    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:  # type: ignore[override]
        raw: aiohttp.web.BaseRequest = request._raw_request  # type: ignore[attr-defined]
        # kmock keeps every request forever (its views match against that list, so keep the current one);
        # we keep our own log instead.
        del self._requests[:-1]
        path = raw.path
        if path.startswith('/_test/'):
            try:
                return await self.handle_test(raw, request)
            except ApiError as e:
                return self._status_response(e)
        entry = {
            'id': len(self.req_log), 'time': time.time(), 'method': raw.method, 'path': path,
            'query': raw.query_string, 'params': dict(raw.query),
            'content_type': raw.headers.get('Content-Type'), 'accept': raw.headers.get('Accept'),
            'user_agent': raw.headers.get('User-Agent'), 'body': self._parsed_body(request), 'status': None,
        }
        self.req_log.append(entry)
        try:
            self.check_faults(raw)
            resp = await self.route(request, raw)
        except ApiError as e:
            resp = self._status_response(e)
        entry['status'] = resp.status
        if self.opts.verbose:
            print(f'emulator: {raw.method} {raw.path_qs} -> {resp.status}', file=sys.stderr, flush=True)
        return resp

    @staticmethod
    def _parsed_body(request: kmock.Request) -> Any:
        if not request.body:
            return None
        try:
            return json.loads(request.body)
        except ValueError:
            return request.text

    def check_faults(self, raw: aiohttp.web.BaseRequest) -> None:
        for f in self.faults:
            if f.times is not None and f.hits >= f.times:
                continue
            if f.method and f.method.upper() != raw.method.upper():
                continue
            if f.path and not f.path.search(raw.path_qs):
                continue
            f.hits += 1
            raise ApiError(f.code, f.reason, f.message, {})

    async def route(self, request: kmock.Request, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        parts = raw.path.strip('/').split('/') if raw.path.strip('/') else []
        # Discovery (served by kmock's scaffold): /, /version, /api, /api/v1, /apis, /apis/g, /apis/g/v
        if raw.method == 'GET' and (
                not parts or parts in (['version'], ['api'], ['apis'], ['api', 'v1'])
                or (parts[0] == 'apis' and len(parts) in (2, 3))):
            if len(parts) >= 2 and parts[0] == 'api' and parts[1] != 'v1':
                raise UNKNOWN_PATH
            return await super()._handle(request)
        if not parts or parts[0] not in ('api', 'apis'):
            raise UNKNOWN_PATH
        pp = kparsing.parse_path(raw.path)
        r = self.by_key.get((pp.group, pp.version, pp.plural))
        if r is None:
            raise UNKNOWN_PATH
        if pp.namespace is not None and not r.namespaced:
            raise UNKNOWN_PATH
        ns = pp.namespace
        name = pp.name
        sub = pp.subresource
        if sub is not None and not (sub == 'status' and r.status):
            raise UNKNOWN_PATH
        if r.namespaced and name is not None and ns is None:
            raise UNKNOWN_PATH  # /apis/g/v/machinesets/NAME without a namespace
        q = raw.query
        method = raw.method
        if method == 'GET' and q.get('watch') in ('true', '1'):
            return await self.serve_watch(raw, r, ns, name)
        if method == 'GET' and name is None:
            return self.serve_list(raw, r, ns)
        if method == 'GET':
            obj = self.objects.get((r.key, ns, name))
            if obj is None:
                raise not_found(r, name)
            return self.respond(raw, obj)
        if method == 'POST' and name is None:
            return await self.serve_create(raw, request, r, ns)
        if method == 'PUT' and name is not None:
            return await self.serve_update(raw, request, r, ns, name, sub)
        if method == 'PATCH' and name is not None:
            return await self.serve_patch(raw, request, r, ns, name, sub)
        if method == 'DELETE' and name is not None and sub is None:
            return self.serve_delete(raw, request, r, ns, name)
        if method == 'DELETE' and name is None:
            return self.serve_delete_collection(raw, request, r, ns)
        raise ApiError(405, 'MethodNotAllowed', f'the server does not allow this method on the requested resource')

    def respond(self, raw: aiohttp.web.BaseRequest, obj: dict, status: int = 200,
                headers: dict | None = None) -> aiohttp.web.Response:
        body = as_metadata(obj) if wants_metadata(raw.headers.get('Accept', '')) else obj
        return aiohttp.web.json_response(body, status=status, headers=headers)

    # ---------------------------------------------------------------- read paths
    def select(self, r: Res, ns: str | None, name: str | None, labels: list, fields: list, obj: dict) -> bool:
        m = obj.get('metadata', {})
        if ns is not None and m.get('namespace') != ns:
            return False
        if name is not None and m.get('name') != name:
            return False
        return labels_match(labels, m.get('labels')) and fields_match(fields, obj)

    def serve_list(self, raw: aiohttp.web.BaseRequest, r: Res, ns: str | None) -> aiohttp.web.Response:
        q = raw.query
        labels = parse_label_selector(q.get('labelSelector'))
        fields = parse_field_selector(q.get('fieldSelector'), r)
        items = sorted(((k[1] or '', k[2]), o) for k, o in self.objects.items()
                       if k[0] == r.key and self.select(r, ns, None, labels, fields, o))
        start = None
        if q.get('continue'):
            try:
                start = tuple(json.loads(base64.urlsafe_b64decode(q['continue'].encode()))['after'])
            except Exception:
                raise bad_request('continue key is not valid')
            items = [(k, o) for k, o in items if k > start]
        limit = int(q.get('limit') or 0)
        list_meta: dict = {'resourceVersion': str(self.rv)}
        if limit and len(items) > limit:
            last = items[limit - 1][0]
            list_meta['continue'] = base64.urlsafe_b64encode(json.dumps({'after': list(last)}).encode()).decode()
            list_meta['remainingItemCount'] = len(items) - limit
            items = items[:limit]
        if wants_metadata(raw.headers.get('Accept', '')):
            body = {'kind': 'PartialObjectMetadataList', 'apiVersion': 'meta.k8s.io/v1', 'metadata': list_meta,
                    'items': [as_metadata(o) for _, o in items]}
        else:
            body = {'kind': f'{r.kind}List', 'apiVersion': r.api_version, 'metadata': list_meta,
                    'items': [o for _, o in items]}
        return aiohttp.web.json_response(body)

    async def serve_watch(self, raw: aiohttp.web.BaseRequest, r: Res, ns: str | None,
                          name: str | None) -> aiohttp.web.StreamResponse:
        q = raw.query
        labels = parse_label_selector(q.get('labelSelector'))
        fields = parse_field_selector(q.get('fieldSelector'), r)
        metadata_only = wants_metadata(raw.headers.get('Accept', ''))
        bookmarks = q.get('allowWatchBookmarks') == 'true'
        send_initial = q.get('sendInitialEvents') == 'true'
        timeout = float(q['timeoutSeconds']) if q.get('timeoutSeconds') else None
        rv_param = q.get('resourceVersion', '')
        if rv_param not in ('', '0') and not re.fullmatch(r'\d+', rv_param):
            raise bad_request(f'invalid resource version: {rv_param!r}')

        def render(obj: dict) -> dict:
            return as_metadata(obj) if metadata_only else obj

        def matches(obj: dict | None) -> bool:
            return obj is not None and self.select(r, ns, name, labels, fields, obj)

        def translate(ev: tuple) -> dict | None:
            rv, _, typ, new, old = ev
            if typ == 'ADDED':
                return {'type': 'ADDED', 'object': render(new)} if matches(new) else None
            if typ == 'DELETED':
                return {'type': 'DELETED', 'object': render(new)} if matches(old) or matches(new) else None
            now_ok, was_ok = matches(new), matches(old)
            if now_ok and was_ok:
                return {'type': 'MODIFIED', 'object': render(new)}
            if now_ok:
                return {'type': 'ADDED', 'object': render(new)}
            if was_ok:
                gone = copy.deepcopy(old)
                gone['metadata']['resourceVersion'] = new['metadata']['resourceVersion']
                return {'type': 'DELETED', 'object': render(gone)}
            return None

        sub = Sub(r.key, asyncio.Queue())
        # No await between subscribing and taking the snapshot: no event can be lost or doubled.
        self.subs.add(sub)
        initial: list[dict] = []
        expired = None
        if rv_param in ('', '0') or send_initial:
            for k, o in sorted(self.objects.items(), key=lambda kv: (kv[0][1] or '', kv[0][2])):
                if k[0] == r.key and matches(o):
                    initial.append({'type': 'ADDED', 'object': render(o)})
            if send_initial and bookmarks:
                initial.append({'type': 'BOOKMARK', 'object': self.bookmark(r, metadata_only, initial_end=True)})
        else:
            since = int(rv_param)
            oldest_logged = self.log[0][0] if self.log else self.rv + 1
            if since < self.floor_rv or (since < oldest_logged - 1 and len(self.log) == self.log.maxlen):
                expired = {'type': 'ERROR', 'object': ApiError(
                    410, 'Expired', f'too old resource version: {since} ({self.floor_rv})').status()}
            else:
                for ev in self.log:
                    if ev[1] == r.key and ev[0] > since:
                        t = translate(ev)
                        if t:
                            initial.append(t)
        resp = aiohttp.web.StreamResponse(status=200, headers={
            'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private'})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        try:
            await resp.prepare(raw)
            if expired:
                await resp.write(json.dumps(expired).encode() + b'\n')
                await resp.write_eof()
                return resp
            for ev in initial:
                await resp.write(json.dumps(ev).encode() + b'\n')
            while not self.stopping:
                wait = None if deadline is None else deadline - loop.time()
                if wait is not None and wait <= 0:
                    break
                if bookmarks and self.opts.bookmark_interval > 0:
                    wait = self.opts.bookmark_interval if wait is None else min(wait, self.opts.bookmark_interval)
                try:
                    ev = await asyncio.wait_for(sub.queue.get(), wait)
                except asyncio.TimeoutError:
                    if bookmarks and self.opts.bookmark_interval > 0 and (deadline is None or loop.time() < deadline):
                        await resp.write(json.dumps({'type': 'BOOKMARK', 'object': self.bookmark(
                            r, metadata_only)}).encode() + b'\n')
                    continue
                if ev is None:  # closed by /_test/close-watches or shutdown
                    break
                t = translate(ev)
                if t:
                    await resp.write(json.dumps(t).encode() + b'\n')
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.subs.discard(sub)
        return resp

    def bookmark(self, r: Res, metadata_only: bool, initial_end: bool = False) -> dict:
        m: dict = {'resourceVersion': str(self.rv)}
        if initial_end:
            m['annotations'] = {'k8s.io/initial-events-end': 'true'}
        if metadata_only:
            return {'kind': 'PartialObjectMetadata', 'apiVersion': 'meta.k8s.io/v1', 'metadata': m}
        return {'kind': r.kind, 'apiVersion': r.api_version, 'metadata': m}

    # ---------------------------------------------------------------- write paths
    @staticmethod
    def body_json(request: kmock.Request) -> Any:
        try:
            return json.loads(request.body or b'null')
        except ValueError as e:
            raise bad_request(f'the body of the request could not be decoded as JSON: {e}')

    @staticmethod
    def manager_of(raw: aiohttp.web.BaseRequest) -> str:
        fm = raw.query.get('fieldManager')
        if fm:
            return fm
        ua = raw.headers.get('User-Agent', 'unknown')
        return ua.split('/')[0] or 'unknown'

    @staticmethod
    def dry_run(raw: aiohttp.web.BaseRequest) -> bool:
        return 'All' in raw.query.getall('dryRun', [])

    def check_identity(self, r: Res, obj: Any, ns: str | None, name: str | None) -> None:
        if not isinstance(obj, dict):
            raise bad_request('the body of the request must be a JSON object')
        m = meta(obj)
        if obj.get('apiVersion') not in (None, r.api_version) or obj.get('kind') not in (None, r.kind):
            raise bad_request(f'the API version in the data ({obj.get("apiVersion")}) does not match the expected '
                              f'API version ({r.api_version})' if obj.get('apiVersion') != r.api_version else
                              f'kind {obj.get("kind")!r} does not match the expected kind {r.kind!r}')
        obj['apiVersion'], obj['kind'] = r.api_version, r.kind
        if name is not None and m.get('name') not in (None, name):
            raise bad_request(f'the name of the object ({m.get("name")}) does not match the name on the URL ({name})')
        if name is not None:
            m['name'] = name
        if r.namespaced:
            if m.get('namespace') not in (None, ns):
                raise bad_request('the namespace of the provided object does not match the namespace sent on the '
                                  'request')
            m['namespace'] = ns
        else:
            m.pop('namespace', None)

    async def write(self, raw: aiohttp.web.BaseRequest, r: Res, ns: str | None, name: str, sub: str | None,
                    compute: Callable[[dict | None], dict], *, options_kind: str,
                    apply_manager: str | None = None, applied: dict | None = None,
                    force: bool = False) -> tuple[dict, int, list[str]]:
        """The common create/update/patch pipeline. Returns (object, http status, warnings)."""
        key = (r.key, ns, name)
        dry = self.dry_run(raw)
        manager = apply_manager or self.manager_of(raw)
        for _attempt in range(10):
            old = copy.deepcopy(self.objects.get(key))
            old_rv = old['metadata']['resourceVersion'] if old else None
            new = compute(copy.deepcopy(old))
            self.check_identity(r, new, ns, name)
            creating = old is None
            m = new['metadata']
            if creating:
                m.pop('resourceVersion', None)
                for k in ('uid', 'creationTimestamp', 'deletionTimestamp', 'generation', 'selfLink'):
                    m.pop(k, None)
                if r.status and r.crd and sub is None:
                    new.pop('status', None)
            else:
                om = old['metadata']
                for k in ('uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds'):
                    if k in om:
                        m[k] = om[k]
                    else:
                        m.pop(k, None)
                m['resourceVersion'] = old_rv
                m.pop('selfLink', None)
                if r.status and sub is None:
                    if 'status' in old:
                        new['status'] = copy.deepcopy(old['status'])
                    else:
                        new.pop('status', None)
                elif sub == 'status':
                    st = new.get('status', _MISSING)
                    new = copy.deepcopy(old)
                    if st is _MISSING:
                        new.pop('status', None)
                    else:
                        new['status'] = st
                    m = new['metadata']
            if apply_manager is not None and not creating and not force:
                self.check_apply_conflicts(r, key, old, applied or {}, apply_manager)
            warnings: list[str] = []
            if self.opts.webhook_url and r.key == WEBHOOK_RESOURCE and sub is None:
                new, warnings = await self.admit(r, 'CREATE' if creating else 'UPDATE', new, old, ns, name,
                                                 dry, 'CreateOptions' if creating else 'UpdateOptions', manager)
                m = new['metadata']
            # Optimistic concurrency: if the object changed while we awaited the webhook, redo.
            cur = self.objects.get(key)
            if (cur is None) != creating or (cur is not None and cur['metadata']['resourceVersion'] != old_rv):
                continue
            if creating:
                m['uid'] = str(uuid.uuid4())
                m['creationTimestamp'] = now_rfc3339()
                m['generation'] = 1
            else:
                gen = old['metadata'].get('generation', 1)
                m['generation'] = gen + 1 if spec_part(new) != spec_part(old) else gen
                if not self.opts.bump_on_noop and without_bookkeeping(new) == without_bookkeeping(old):
                    # The real apiserver skips the etcd write (no RV bump, no watch event) for a no-op.
                    if not dry:
                        self.track_ownership(key, old, old, manager, 'Apply' if apply_manager else 'Update',
                                             applied)
                    return old, 200, warnings
            if dry:
                if creating:
                    m.pop('resourceVersion', None)
                return new, 201 if creating else 200, warnings
            m['resourceVersion'] = str(self.next_rv())
            self.track_ownership(key, old, new, manager, 'Apply' if apply_manager else 'Update', applied)
            self.store(r, key, new, old)
            return new, 201 if creating else 200, warnings
        raise conflict(r, name)

    # ----- server-side apply field ownership (a reduced model of structured-merge-diff)
    def check_apply_conflicts(self, r: Res, key: tuple, old: dict, applied: dict, manager: str) -> None:
        owners = self.owners.get(key, {})
        clashes = []
        for path, val in leaf_paths(applied).items():
            if r.status and path[:1] == ('status',):
                continue
            cur = get_path(old, path)
            if cur is _MISSING or cur == val:
                continue
            for (mgr, _op), paths in owners.items():
                if mgr != manager and path in paths:
                    clashes.append((mgr, path))
        if clashes:
            lines = '\n'.join(f'- conflict with "{m}": .{".".join(p)}' for m, p in clashes)
            msg = (f'Apply failed with {len(clashes)} conflict{"s" if len(clashes) > 1 else ""}: '
                   + (f'conflict with "{clashes[0][0]}": .{".".join(clashes[0][1])}' if len(clashes) == 1 else lines))
            raise ApiError(409, 'Conflict', msg, {**_details(r, key[2]), 'causes': [
                {'reason': 'FieldManagerConflict', 'message': f'conflict with "{m}"', 'field': '.' + '.'.join(p)}
                for m, p in clashes]})

    def track_ownership(self, key: tuple, old: dict | None, new: dict, manager: str, op: str,
                        applied: dict | None) -> None:
        owners = self.owners.setdefault(key, {})
        new_leaves = leaf_paths(new)
        if op == 'Apply':
            owners[(manager, 'Apply')] = set(leaf_paths(applied or {}))
        else:
            old_leaves = leaf_paths(old) if old else {}
            changed = {p for p, v in new_leaves.items() if old_leaves.get(p, _MISSING) != v}
            for paths in owners.values():
                paths -= changed
            owners.setdefault((manager, 'Update'), set()).update(changed)
        for paths in owners.values():
            paths &= set(new_leaves)
        for k in [k for k, v in owners.items() if not v]:
            del owners[k]

    # ----- verbs
    async def serve_create(self, raw, request, r: Res, ns: str | None) -> aiohttp.web.Response:
        obj = self.body_json(request)
        if not isinstance(obj, dict):
            raise bad_request('the body of the request must be a JSON object')
        m = meta(obj)
        if not m.get('name') and m.get('generateName'):
            m['name'] = m['generateName'] + uuid.uuid4().hex[:5]
        name = m.get('name')
        if not name:
            raise invalid(r, '', 'metadata.name: Required value: name or generateName is required')
        if m.get('resourceVersion'):
            raise bad_request('resourceVersion should not be set on objects to be created')

        def compute(old):
            if old is not None:
                raise already_exists(r, name)
            return obj
        out, status, warnings = await self.write(raw, r, ns, name, None, compute, options_kind='CreateOptions')
        return self.respond(raw, out, status, self.warning_headers(warnings))

    async def serve_update(self, raw, request, r: Res, ns, name, sub) -> aiohttp.web.Response:
        obj = self.body_json(request)
        if not isinstance(obj, dict):
            raise bad_request('the body of the request must be a JSON object')
        want_rv = (obj.get('metadata') or {}).get('resourceVersion')

        def compute(old):
            if old is None:
                raise not_found(r, name)
            if want_rv and want_rv != old['metadata']['resourceVersion']:
                raise conflict(r, name)
            if not want_rv and r.crd:
                raise invalid(r, name, 'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update')
            return copy.deepcopy(obj)
        out, status, warnings = await self.write(raw, r, ns, name, sub, compute, options_kind='UpdateOptions')
        return self.respond(raw, out, status, self.warning_headers(warnings))

    async def serve_patch(self, raw, request, r: Res, ns, name, sub) -> aiohttp.web.Response:
        ctype = (raw.headers.get('Content-Type') or '').split(';')[0].strip().lower()
        accepted = [JSONPATCH, MERGE, APPLY] + ([] if r.crd else [STRATEGIC])
        if ctype not in accepted:
            raise ApiError(415, 'UnsupportedMediaType',
                           f'the body of the request was in an unknown format - accepted media types include: '
                           f'{", ".join(accepted)}')
        if ctype == APPLY:
            return await self.serve_apply(raw, request, r, ns, name, sub)
        patch = self.body_json(request)

        def compute(old):
            if old is None:
                raise not_found(r, name)
            if ctype == JSONPATCH:
                if not isinstance(patch, list):
                    raise bad_request('json: cannot unmarshal object into Go value of type jsonpatch.Patch')
                try:
                    new = jsonpatch.apply_patch(old, patch)
                except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
                    raise invalid(r, name, f'the server rejected our request due to an error in our request: {e}')
            else:  # merge, and strategic merge treated as a JSON merge patch
                if not isinstance(patch, dict):
                    raise bad_request('the body of the request must be a JSON object for a merge patch')
                new = merge_patch(old, patch)
            want = (new.get('metadata') or {}).get('resourceVersion')
            if want and want != old['metadata']['resourceVersion']:
                raise conflict(r, name)
            return new
        out, status, warnings = await self.write(raw, r, ns, name, sub, compute, options_kind='UpdateOptions')
        return self.respond(raw, out, status, self.warning_headers(warnings))

    async def serve_apply(self, raw, request, r: Res, ns, name, sub) -> aiohttp.web.Response:
        manager = raw.query.get('fieldManager')
        if not manager:
            raise invalid(r, name, 'fieldManager: Required value: is required for apply patch')
        try:
            applied = json.loads(request.body)
        except ValueError:
            try:
                import yaml  # type: ignore
                applied = yaml.safe_load(request.text)
            except ImportError:
                raise ApiError(415, 'UnsupportedMediaType', 'this emulator only understands JSON apply bodies')
            except Exception as e:
                raise bad_request(f'error decoding YAML: {e}')
        if not isinstance(applied, dict):
            raise bad_request('the apply body must be an object')
        if applied.get('apiVersion') != r.api_version or applied.get('kind') != r.kind:
            raise bad_request('apiVersion and kind are required in an apply patch and must match the resource')
        force = raw.query.get('force') == 'true'

        def compute(old):
            if old is None:
                return copy.deepcopy(applied)
            new = merge_patch(old, applied)
            # Fields this manager applied before and no longer applies are removed, unless others own them.
            before = self.owners.get((r.key, ns, name), {}).get((manager, 'Apply'), set())
            now = set(leaf_paths(applied))
            others = set().union(*[p for (mg, _o), p in self.owners.get((r.key, ns, name), {}).items()
                                   if mg != manager]) if self.owners.get((r.key, ns, name)) else set()
            for p in before - now - others:
                del_path(new, p)
            return new
        out, status, warnings = await self.write(raw, r, ns, name, sub, compute, options_kind='PatchOptions',
                                                 apply_manager=manager, applied=applied, force=force)
        return self.respond(raw, out, status, self.warning_headers(warnings))

    def serve_delete(self, raw, request, r: Res, ns, name) -> aiohttp.web.Response:
        key = (r.key, ns, name)
        old = self.objects.get(key)
        if old is None:
            raise not_found(r, name)
        opts = self._parsed_body(request) if request.body else {}
        pre = (opts or {}).get('preconditions') or {} if isinstance(opts, dict) else {}
        if pre.get('resourceVersion') and pre['resourceVersion'] != old['metadata']['resourceVersion']:
            raise conflict(r, name, f'the ResourceVersion in the precondition ({pre["resourceVersion"]}) does not '
                                    f'match the ResourceVersion in record ({old["metadata"]["resourceVersion"]}). '
                                    f'The object might have been modified')
        if pre.get('uid') and pre['uid'] != old['metadata'].get('uid'):
            raise conflict(r, name, f'the UID in the precondition ({pre["uid"]}) does not match the UID in record '
                                    f'({old["metadata"].get("uid")}). The object might have been deleted and then '
                                    f'recreated')
        if self.dry_run(raw):
            return self.respond(raw, old)
        if old['metadata'].get('finalizers'):
            if old['metadata'].get('deletionTimestamp'):
                return self.respond(raw, old)
            new = copy.deepcopy(old)
            new['metadata']['deletionTimestamp'] = now_rfc3339()
            new['metadata']['deletionGracePeriodSeconds'] = 0
            new['metadata']['resourceVersion'] = str(self.next_rv())
            self.store(r, key, new, old)
            return self.respond(raw, new)
        gone = self.hard_delete(r, key)
        if r.crd:
            return self.respond(raw, gone)
        return aiohttp.web.json_response({
            'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Success',
            'details': {**_details(r, name), 'uid': gone['metadata'].get('uid')}})

    def serve_delete_collection(self, raw, request, r: Res, ns) -> aiohttp.web.Response:
        q = raw.query
        labels = parse_label_selector(q.get('labelSelector'))
        fields = parse_field_selector(q.get('fieldSelector'), r)
        keys = [k for k, o in self.objects.items() if k[0] == r.key and self.select(r, ns, None, labels, fields, o)]
        items = []
        for k in keys:
            if self.dry_run(raw):
                items.append(self.objects[k])
            elif self.objects[k]['metadata'].get('finalizers'):
                old = self.objects[k]
                new = copy.deepcopy(old)
                new['metadata'].setdefault('deletionTimestamp', now_rfc3339())
                new['metadata']['resourceVersion'] = str(self.next_rv())
                items.append(self.store(r, k, new, old))
            else:
                items.append(self.hard_delete(r, k))
        return aiohttp.web.json_response({'kind': f'{r.kind}List', 'apiVersion': r.api_version,
                                          'metadata': {'resourceVersion': str(self.rv)}, 'items': items})

    @staticmethod
    def warning_headers(warnings: list[str]) -> dict | None:
        if not warnings:
            return None
        return {'Warning': ', '.join('299 - ' + json.dumps(w) for w in warnings)}

    # ---------------------------------------------------------------- admission webhook
    async def admit(self, r: Res, operation: str, obj: dict, old: dict | None, ns: str | None, name: str,
                    dry: bool, options_kind: str, manager: str) -> tuple[dict, list[str]]:
        gvk = {'group': r.group, 'version': r.version, 'kind': r.kind}
        gvr = {'group': r.group, 'version': r.version, 'resource': r.plural}
        req_uid = str(uuid.uuid4())
        request = {
            'uid': req_uid, 'kind': gvk, 'resource': gvr, 'requestKind': gvk, 'requestResource': gvr,
            'name': name, 'operation': operation,
            'userInfo': {'username': 'system:admin', 'groups': ['system:masters', 'system:authenticated']},
            'object': obj, 'oldObject': old, 'dryRun': dry,
            'options': {'kind': options_kind, 'apiVersion': 'meta.k8s.io/v1',
                        **({'fieldManager': manager} if manager else {})},
        }
        if ns is not None:
            request['namespace'] = ns
        review = {'apiVersion': 'admission.k8s.io/v1', 'kind': 'AdmissionReview', 'request': request}
        record: dict = {'time': time.time(), 'request': copy.deepcopy(review), 'response': None,
                        'http_status': None, 'error': None, 'outcome': None}
        self.webhook_calls.append(record)
        url = self.opts.webhook_url
        assert url is not None
        url = url + ('&' if '?' in url else '?') + f'timeout={int(self.opts.webhook_timeout)}s'
        try:
            if self.http is None:
                ctx = ssl.create_default_context(cafile=self.opts.webhook_ca) if self.opts.webhook_ca else None
                self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx if ctx else True))
            async with self.http.post(url, json=review, headers={'Accept': 'application/json'},
                                      timeout=aiohttp.ClientTimeout(total=self.opts.webhook_timeout)) as resp:
                record['http_status'] = resp.status
                text = await resp.text()
                if resp.status != 200:
                    raise RuntimeError(f'received invalid webhook response: HTTP {resp.status}: {text[:500]}')
                answer = json.loads(text)
            record['response'] = answer
            if answer.get('apiVersion') != 'admission.k8s.io/v1' or answer.get('kind') != 'AdmissionReview':
                raise RuntimeError(f'expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got '
                                   f'{answer.get("apiVersion")}, Kind={answer.get("kind")}')
            response = answer.get('response') or {}
            if response.get('uid') != req_uid:
                raise RuntimeError(f'expected response.uid="{req_uid}", got "{response.get("uid")}"')
            warnings = list(response.get('warnings') or [])
            if not response.get('allowed'):
                st = response.get('status') or {}
                record['outcome'] = 'denied'
                code = st.get('code') or 403
                raise ApiError(code, st.get('reason') or 'Forbidden',
                               f'admission webhook "{self.opts.webhook_name}" denied the request'
                               + (f': {st["message"]}' if st.get('message') else ''), {})
            if response.get('patch'):
                if response.get('patchType') != 'JSONPatch':
                    raise RuntimeError(f'unsupported patch type {response.get("patchType")!r}')
                ops = json.loads(base64.b64decode(response['patch']))
                obj = jsonpatch.apply_patch(obj, ops)
                record['outcome'] = 'mutated'
            else:
                record['outcome'] = 'allowed'
            record['result'] = copy.deepcopy(obj)
            return obj, warnings
        except ApiError:
            raise
        except Exception as e:  # unreachable, TLS failure, timeout, bad answer, bad patch
            record['error'] = f'{type(e).__name__}: {e}'
            msg = f'failed calling webhook "{self.opts.webhook_name}": failed to call webhook: Post "{url}": {e}'
            if self.opts.webhook_failure_policy == 'Fail':
                record['outcome'] = 'rejected-error'
                print(f'emulator: webhook error (failurePolicy Fail): {msg}', file=sys.stderr, flush=True)
                raise ApiError(500, 'InternalError', f'Internal error occurred: {msg}', {})
            record['outcome'] = 'ignored-error'
            print(f'emulator: webhook error ignored (failurePolicy Ignore), storing unmutated: {msg}',
                  file=sys.stderr, flush=True)
            return obj, []

    # ---------------------------------------------------------------- test introspection
    async def handle_test(self, raw: aiohttp.web.BaseRequest, request: kmock.Request) -> aiohttp.web.Response:
        p, m = raw.path, raw.method
        j = aiohttp.web.json_response
        if p == '/_test/health' and m == 'GET':
            return j({'ok': True, 'rv': str(self.rv), 'objects': len(self.objects), 'watches': len(self.subs)})
        if p == '/_test/requests':
            if m == 'GET':
                return j(self.req_log)
            if m == 'DELETE':
                n = len(self.req_log)
                self.req_log.clear()
                return j({'cleared': n})
        if p == '/_test/webhook-calls':
            if m == 'GET':
                return j(self.webhook_calls)
            if m == 'DELETE':
                n = len(self.webhook_calls)
                self.webhook_calls.clear()
                return j({'cleared': n})
        if p == '/_test/objects':
            if m == 'GET':
                return j(list(self.objects.values()))
            body = self.body_json(request)
            objs = body if isinstance(body, list) else [body]
            if m == 'POST':
                out = [self.put_object(o) for o in objs]
                return j(out if isinstance(body, list) else out[0])
            if m == 'DELETE':
                out = []
                for o in objs:
                    r = self.res_for(o)
                    key = self.key_for(r, o)
                    if key not in self.objects:
                        raise not_found(r, key[2])
                    out.append(self.hard_delete(r, key))
                return j(out if isinstance(body, list) else out[0])
        if p == '/_test/close-watches' and m == 'POST':
            n = len(self.subs)
            for sub in list(self.subs):
                sub.queue.put_nowait(None)
            return j({'closed': n})
        if p == '/_test/faults':
            if m == 'GET':
                return j([{'method': f.method, 'path': f.path.pattern if f.path else None, 'code': f.code,
                           'reason': f.reason, 'times': f.times, 'hits': f.hits} for f in self.faults])
            if m == 'POST':
                b = self.body_json(request)
                self.faults.append(Fault(b.get('method'), re.compile(b['path']) if b.get('path') else None,
                                         int(b.get('code', 500)), b.get('reason', 'InternalError'),
                                         b.get('message', 'injected fault'), b.get('times')))
                return j({'faults': len(self.faults)})
            if m == 'DELETE':
                self.faults.clear()
                return j({'faults': 0})
        raise UNKNOWN_PATH

    def put_object(self, obj: dict) -> dict:
        """Create-or-replace a full object, bypassing admission; always bumps RV and emits an event."""
        obj = copy.deepcopy(obj)
        r = self.res_for(obj)
        key = self.key_for(r, obj)
        old = self.objects.get(key)
        m = meta(obj)
        if old is not None:
            om = old['metadata']
            m.setdefault('uid', om.get('uid'))
            m.setdefault('creationTimestamp', om.get('creationTimestamp'))
            if 'generation' not in m:
                gen = om.get('generation', 1)
                m['generation'] = gen + 1 if spec_part(obj) != spec_part(old) else gen
        else:
            m.setdefault('uid', str(uuid.uuid4()))
            m.setdefault('creationTimestamp', now_rfc3339())
            m.setdefault('generation', 1)
        m['resourceVersion'] = str(self.next_rv())
        return self.store(r, key, obj, old)


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

async def amain(args: argparse.Namespace) -> int:
    resources = list(BASE_RESOURCES)
    if not args.no_machineconfiguration:
        resources.append(MACHINECONFIGURATIONS)
    resources += [parse_extra_resource(s) for s in args.extra_resource]
    opts = Opts(webhook_url=args.webhook_url, webhook_ca=args.webhook_ca, webhook_name=args.webhook_name,
                webhook_timeout=args.webhook_timeout, webhook_failure_policy=args.webhook_failure_policy,
                bump_on_noop=args.bump_on_noop, bookmark_interval=args.bookmark_interval,
                state_file=args.state_file, verbose=args.verbose)
    emu = Emulator()
    emu.setup(resources, opts)
    if args.state_file and os.path.exists(args.state_file):
        emu.load_state(args.state_file)
        print(f'emulator: state loaded from {args.state_file} ({len(emu.objects)} objects)', file=sys.stderr)
    elif args.seed:
        with open(args.seed) as f:
            seed = json.load(f)
        if not isinstance(seed, list):
            raise SystemExit('--seed must hold a JSON array of objects')
        try:
            emu.load_seed(seed, skip={(MACHINECONFIGURATIONS.api_version, MACHINECONFIGURATIONS.kind)}
                          if args.no_machineconfiguration else set())
        except ApiError as e:
            raise SystemExit(f'--seed: {e.message}')
        emu.save_state()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async with emu, kmock.Server(emu, host='127.0.0.1', port=args.port, user_agent='') as server:
        print(f'READY http://127.0.0.1:{server.port}', flush=True)
        print(f'emulator: serving {len(resources)} resources, {len(emu.objects)} objects, '
              f'webhook={opts.webhook_url or "-"}', file=sys.stderr, flush=True)
        await stop.wait()
        emu.stopping = True
        for sub in list(emu.subs):
            sub.queue.put_nowait(None)
        # Watches end within one loop turn; a hard exit covers any straggler connection.
        loop.call_later(3.0, os._exit, 0)
        await asyncio.sleep(0.05)
        if emu.http is not None:
            await emu.http.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, required=True, help='TCP port on 127.0.0.1 (0: pick one)')
    ap.add_argument('--seed', help='JSON array of full Kubernetes objects to start with')
    ap.add_argument('--webhook-url', help='https URL of the mutating webhook for machinesets')
    ap.add_argument('--webhook-ca', help='PEM CA bundle to verify the webhook with')
    ap.add_argument('--webhook-name', default='bootimage-webhook.test', help='name used in webhook messages')
    ap.add_argument('--webhook-timeout', type=float, default=10.0, help='seconds (apiserver default: 10)')
    ap.add_argument('--webhook-failure-policy', choices=['Ignore', 'Fail'], default='Ignore')
    ap.add_argument('--no-machineconfiguration', action='store_true',
                    help='do not serve operator.openshift.io/v1 machineconfigurations (absent CRD)')
    ap.add_argument('--extra-resource', action='append', default=[],
                    metavar='G/V/PLURAL=Kind[,namespaced][,status][,crd]')
    ap.add_argument('--bump-on-noop', action='store_true',
                    help='bump resourceVersion even when a write changes nothing (the real apiserver does not)')
    ap.add_argument('--bookmark-interval', type=float, default=0.0,
                    help='send a BOOKMARK every N seconds on watches that allow them (0: never)')
    ap.add_argument('--state-file', help='persist objects here and reload them on start (survives restarts)')
    ap.add_argument('--verbose', action='store_true', help='log every request to stderr')
    args = ap.parse_args()
    try:
        return asyncio.run(amain(args))
    except KeyboardInterrupt:
        return 0


if __name__ == '__main__':
    sys.exit(main())
