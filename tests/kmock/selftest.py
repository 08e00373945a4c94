#!/usr/bin/env python3
"""Self-test of emulator.py (REST semantics only; the kube-rs side is proven separately).

    $KMOCK_PYTHON tests/kmock/selftest.py        # needs the kmock venv (aiohttp) and openssl

Starts the emulator (and fake_webhook.py over TLS with a throw-away CA) as subprocesses and
prints one line per check, then "N passed, 0 failed".  Exit code 1 on any failure.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
NS = 'openshift-machine-api'
MS = f'/apis/machine.openshift.io/v1beta1/namespaces/{NS}/machinesets'
CM = '/api/v1/namespaces/openshift-machine-config-operator/configmaps'
LEASES = f'/apis/coordination.k8s.io/v1/namespaces/{NS}/leases'
SEED = [
    {'apiVersion': 'v1', 'kind': 'ConfigMap',
     'metadata': {'name': 'coreos-bootimages', 'namespace': 'openshift-machine-config-operator'},
     'data': {'releaseVersion': '4.19.0'}},
    {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'm0', 'labels': {'node-role.kubernetes.io/master': ''}}},
    {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'w0', 'labels': {'node-role.kubernetes.io/worker': '',
                                                                              'zone': 'a'}}},
    {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'w1', 'labels': {'node-role.kubernetes.io/worker': '',
                                                                              'zone': 'b'}}},
    {'apiVersion': 'machine.openshift.io/v1beta1', 'kind': 'MachineSet',
     'metadata': {'name': 'ms-a', 'namespace': NS}, 'spec': {'replicas': 1}, 'status': {'replicas': 1}},
    {'apiVersion': 'operator.openshift.io/v1', 'kind': 'MachineConfiguration', 'metadata': {'name': 'cluster'},
     'spec': {}},
]

passed = failed = 0


def check(name, cond, detail=''):
    global passed, failed
    if cond:
        passed += 1
        print(f'ok   {name}')
    else:
        failed += 1
        print(f'FAIL {name} {detail}')


async def start(args, log):
    p = await asyncio.create_subprocess_exec(PY, *args, stdout=subprocess.PIPE, stderr=open(log, 'w'))
    line = (await asyncio.wait_for(p.stdout.readline(), 20)).decode().strip()
    assert line.startswith('READY '), line
    return p, line.split()[1]


async def stop(p):
    p.terminate()
    return await asyncio.wait_for(p.wait(), 10)


def make_pki(d):
    def run(*a):
        subprocess.run(a, check=True, capture_output=True, cwd=d)
    run('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days',
        '2', '-subj', '/CN=selftest CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext',
        'keyUsage=critical,keyCertSign,cRLSign')
    run('openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj',
        '/CN=localhost')
    with open(os.path.join(d, 'leaf.ext'), 'w') as f:
        f.write('basicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n'
                'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
    run('openssl', 'x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
        '-out', 'leaf.pem', '-days', '2', '-extfile', 'leaf.ext')


async def watch_lines(s, url, n, timeout=5, headers=None):
    out = []
    async with s.get(url, headers=headers or {}) as r:
        try:
            async with asyncio.timeout(timeout):
                async for line in r.content:
                    out.append(json.loads(line))
                    if len(out) >= n:
                        break
        except TimeoutError:
            pass
    return out


async def main():
    d = tempfile.mkdtemp(prefix='kmock-selftest-')
    make_pki(d)
    seed = os.path.join(d, 'seed.json')
    with open(seed, 'w') as f:
        json.dump(SEED, f)
    hooks = {}
    for mode in ('patch', 'deny', 'error'):
        hooks[mode] = await start([os.path.join(HERE, 'fake_webhook.py'), '--port', '0', '--cert',
                                   os.path.join(d, 'leaf.pem'), '--key', os.path.join(d, 'leaf.key'), '--mode', mode],
                                  os.path.join(d, f'hook-{mode}.log'))
    emu_py = os.path.join(HERE, 'emulator.py')
    state = os.path.join(d, 'state.json')
    emu, url = await start([emu_py, '--port', '0', '--seed', seed, '--state-file', state, '--webhook-url',
                            hooks['patch'][1] + '/mutate', '--webhook-ca', os.path.join(d, 'ca.pem')],
                           os.path.join(d, 'emu.log'))
    async with aiohttp.ClientSession(url) as s:
        async def req(method, path, body=None, ctype='application/json', **kw):
            data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
            async with s.request(method, path, data=data, headers={'Content-Type': ctype}, **kw) as r:
                return r.status, await r.json(content_type=None), r.headers

        # ---- metadata filled, RV bumps, generation
        st, ms, _ = await req('GET', f'{MS}/ms-a')
        check('seed fills uid/creationTimestamp/generation/resourceVersion',
              all(k in ms['metadata'] for k in ('uid', 'creationTimestamp', 'generation', 'resourceVersion')))
        rv0 = int(ms['metadata']['resourceVersion'])
        st, ms2, h = await req('PATCH', f'{MS}/ms-a', {'spec': {'replicas': 3}}, 'application/merge-patch+json')
        check('merge patch bumps RV and generation',
              int(ms2['metadata']['resourceVersion']) > rv0 and ms2['metadata']['generation'] == 2, ms2['metadata'])
        check('webhook mutation stored and returned', ms2['metadata'].get('annotations', {}).get(
            'fake-webhook/seen') == 'UPDATE')
        check('webhook warnings become a Warning header', 'fake webhook mutated this' in h.get('Warning', ''))
        st, ms3, _ = await req('PATCH', f'{MS}/ms-a', {'status': {'replicas': 9}}, 'application/merge-patch+json')
        check('main endpoint ignores .status for a resource with /status', ms3['status'] == {'replicas': 1})
        st, ms4, _ = await req('PATCH', f'{MS}/ms-a/status', {'status': {'replicas': 9}}, 'application/merge-patch+json')
        check('/status subresource patches status only', st == 200 and ms4['status'] == {'replicas': 9}
              and ms4['metadata']['generation'] == 2, (st, ms4))
        st, body, _ = await req('PATCH', f'{MS}/ms-a', {'spec': {}}, 'application/strategic-merge-patch+json')
        check('strategic merge patch on a CRD -> 415 like the apiserver', st == 415, (st, body))
        st, body, _ = await req('PATCH', f'{MS}/ms-a', [{'op': 'test', 'path': '/spec/replicas', 'value': 3},
                                                       {'op': 'replace', 'path': '/spec/replicas', 'value': 4}],
                                'application/json-patch+json')
        check('json patch with test op', st == 200 and body['spec']['replicas'] == 4, (st, body))
        st, body, _ = await req('PATCH', f'{MS}/ms-a', [{'op': 'test', 'path': '/spec/replicas', 'value': 99}],
                                'application/json-patch+json')
        check('failed json patch test -> 422', st == 422, (st, body))
        # ---- PUT
        st, cur, _ = await req('GET', f'{MS}/ms-a')
        stale = json.loads(json.dumps(cur))
        cur['spec']['replicas'] = 5
        st, put, _ = await req('PUT', f'{MS}/ms-a', cur)
        check('PUT with current RV', st == 200 and put['spec']['replicas'] == 5, (st, put))
        st, body, _ = await req('PUT', f'{MS}/ms-a', stale)
        check('PUT with stale RV -> 409 Conflict', st == 409 and body['reason'] == 'Conflict', (st, body))
        del stale['metadata']['resourceVersion']
        st, body, _ = await req('PUT', f'{MS}/ms-a', stale)
        check('PUT without RV on a CRD -> 422', st == 422, (st, body))
        # ---- create / conflicts / delete
        st, body, _ = await req('POST', MS, {'apiVersion': 'machine.openshift.io/v1beta1', 'kind': 'MachineSet',
                                             'metadata': {'name': 'ms-new'}, 'spec': {'replicas': 0}})
        check('create -> 201 through the webhook (CREATE)', st == 201 and body['metadata']['namespace'] == NS
              and body['metadata']['annotations']['fake-webhook/seen'] == 'CREATE', (st, body))
        st, body, _ = await req('POST', MS, {'apiVersion': 'machine.openshift.io/v1beta1', 'kind': 'MachineSet',
                                             'metadata': {'name': 'ms-new'}})
        check('create twice -> 409 AlreadyExists', st == 409 and body['reason'] == 'AlreadyExists', (st, body))
        st, body, _ = await req('DELETE', f'{MS}/ms-new')
        check('delete', st == 200, (st, body))
        st, body, _ = await req('GET', f'{MS}/ms-new')
        check('get deleted -> 404 NotFound', st == 404 and body['reason'] == 'NotFound', (st, body))
        st, body, _ = await req('POST', CM, {'apiVersion': 'v1', 'kind': 'ConfigMap',
                                             'metadata': {'name': 'fin', 'finalizers': ['x/y']}})
        st, body, _ = await req('DELETE', f'{CM}/fin')
        check('delete with finalizers sets deletionTimestamp', st == 200 and 'deletionTimestamp' in body['metadata'])
        st, body, _ = await req('PATCH', f'{CM}/fin', {'metadata': {'finalizers': None}}, 'application/merge-patch+json')
        st2, _, _ = await req('GET', f'{CM}/fin')
        check('removing the last finalizer deletes', st == 200 and st2 == 404, (st, st2))
        # ---- no-op
        st, a, _ = await req('PATCH', f'{CM}/coreos-bootimages', {'data': {'releaseVersion': '4.19.0'}},
                             'application/merge-patch+json')
        st, b, _ = await req('PATCH', f'{CM}/coreos-bootimages', {'data': {'releaseVersion': '4.19.0'}},
                             'application/merge-patch+json')
        check('no-op patch keeps RV (as the apiserver)', a['metadata']['resourceVersion'] ==
              b['metadata']['resourceVersion'])
        # ---- selectors / pagination / metadata-only
        st, body, _ = await req('GET', '/api/v1/nodes?labelSelector=node-role.kubernetes.io/worker,zone in (b,c)')
        check('label selector set-based', [i['metadata']['name'] for i in body['items']] == ['w1'], body)
        st, body, _ = await req('GET', '/api/v1/nodes?labelSelector=!node-role.kubernetes.io/master,zone!=a')
        check('label selector !key and !=', [i['metadata']['name'] for i in body['items']] == ['w1'], body)
        st, body, _ = await req('GET', '/api/v1/nodes?fieldSelector=metadata.name%3Dw0')
        check('field selector metadata.name', [i['metadata']['name'] for i in body['items']] == ['w0'])
        st, body, _ = await req('GET', '/api/v1/nodes?fieldSelector=spec.foo%3Dx')
        check('unsupported field label -> 400', st == 400 and 'field label not supported' in body['message'])
        st, p1, _ = await req('GET', '/api/v1/nodes?limit=2')
        st, p2, _ = await req('GET', '/api/v1/nodes?limit=2&continue=' + p1['metadata']['continue'])
        check('pagination', len(p1['items']) == 2 and len(p2['items']) == 1 and 'continue' not in p2['metadata'])
        async with s.get('/api/v1/nodes', headers={
                'Accept': 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1'}) as r:
            body = await r.json()
        check('metadata-only list', body['kind'] == 'PartialObjectMetadataList' and
              set(body['items'][0]) == {'kind', 'apiVersion', 'metadata'})
        # ---- watch: replay from RV, selector transitions
        st, lst, _ = await req('GET', '/api/v1/nodes?labelSelector=zone')
        rv = lst['metadata']['resourceVersion']
        await req('PATCH', '/api/v1/nodes/w0', {'metadata': {'labels': {'zone': None}}}, 'application/merge-patch+json')
        await req('PATCH', '/api/v1/nodes/m0', {'metadata': {'labels': {'zone': 'c'}}}, 'application/merge-patch+json')
        evs = await watch_lines(s, f'/api/v1/nodes?watch=true&labelSelector=zone&resourceVersion={rv}', 2)
        check('watch replays from RV; leaving selector -> DELETED, entering -> ADDED',
              [(e['type'], e['object']['metadata']['name']) for e in evs] == [('DELETED', 'w0'), ('ADDED', 'm0')],
              evs)
        evs = await watch_lines(s, '/api/v1/nodes?watch=true&resourceVersion=1', 1)
        check('watch from an RV before this process -> ERROR 410 Expired',
              evs and evs[0]['type'] == 'ERROR' and evs[0]['object']['code'] == 410, evs)
        evs = await watch_lines(s, '/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true'
                                   '&resourceVersionMatch=NotOlderThan', 4)
        check('streaming list ends with initial-events-end bookmark', evs[-1]['type'] == 'BOOKMARK' and
              evs[-1]['object']['metadata']['annotations'] == {'k8s.io/initial-events-end': 'true'}, evs)
        # ---- SSA
        st, body, _ = await req('POST', LEASES, {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                                                 'metadata': {'name': 'l'}, 'spec': {}})
        ap = {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease', 'metadata': {'name': 'l'},
              'spec': {'holderIdentity': 'a', 'leaseDurationSeconds': 5}}
        st, body, _ = await req('PATCH', f'{LEASES}/l?fieldManager=mgr-a', ap, 'application/apply-patch+yaml')
        check('apply by mgr-a', st == 200 and body['spec']['holderIdentity'] == 'a', (st, body))
        ap['spec']['holderIdentity'] = 'b'
        st, body, _ = await req('PATCH', f'{LEASES}/l?fieldManager=mgr-b', ap, 'application/apply-patch+yaml')
        check('apply of a field owned by another manager -> 409 Conflict', st == 409 and body['reason'] == 'Conflict'
              and 'holderIdentity' in body['message'], (st, body))
        st, body, _ = await req('PATCH', f'{LEASES}/l?fieldManager=mgr-b&force=true', ap,
                                'application/apply-patch+yaml')
        check('forced apply takes over', st == 200 and body['spec']['holderIdentity'] == 'b', (st, body))
        st, body, _ = await req('PATCH', f'{LEASES}/l', ap, 'application/apply-patch+yaml')
        check('apply without fieldManager -> 422', st == 422, (st, body))
        st, body, _ = await req('PATCH', f'{LEASES}/l?fieldManager=mgr-b', {'spec': {'holderIdentity': None}},
                                'application/strategic-merge-patch+json')
        ap['spec']['holderIdentity'] = 'a'
        st, body, _ = await req('PATCH', f'{LEASES}/l?fieldManager=mgr-a', ap, 'application/apply-patch+yaml')
        check('after the field is removed by an update, another manager may apply it', st == 200, (st, body))
        st, body, _ = await req('PATCH', f'{LEASES}/new?fieldManager=x', {**ap, 'metadata': {'name': 'new'}},
                                'application/apply-patch+yaml')
        check('apply creates an absent object', st == 201 and body['metadata']['name'] == 'new', (st, body))
        # ---- introspection
        async with s.get('/_test/requests') as r:
            log = await r.json()
        check('/_test/requests records method/path/content_type/body', any(
            e['method'] == 'PATCH' and e['content_type'] == 'application/apply-patch+yaml' and
            e['body']['spec']['holderIdentity'] for e in log))
        async with s.delete('/_test/requests') as r:
            pass
        async with s.get('/_test/requests') as r:
            check('DELETE /_test/requests clears', await r.json() == [])
        async with s.post('/_test/faults', json={'method': 'PATCH', 'path': 'machinesets', 'code': 500,
                                                 'times': 1}) as r:
            pass
        st1, _, _ = await req('PATCH', f'{MS}/ms-a', {'metadata': {'labels': {'f': '1'}}}, 'application/merge-patch+json')
        st2, _, _ = await req('PATCH', f'{MS}/ms-a', {'metadata': {'labels': {'f': '1'}}}, 'application/merge-patch+json')
        check('injected fault fires once', (st1, st2) == (500, 200), (st1, st2))
        # close-watches
        async def one_watch():
            return await watch_lines(s, '/api/v1/nodes?watch=true', 99, timeout=5)
        t = asyncio.create_task(one_watch())
        await asyncio.sleep(0.3)
        async with s.post('/_test/close-watches') as r:
            closed = (await r.json())['closed']
        evs = await t
        check('/_test/close-watches ends open watches', closed >= 1 and len(evs) == 3, (closed, len(evs)))
        st, body, _ = await req('GET', f'{MS}/ms-a')
        ms_rv = body['metadata']['resourceVersion']

    await stop(emu)
    # ---- restart with --state-file: state survives and a watch from the last RV resumes
    emu, url2 = await start([emu_py, '--port', url.rsplit(':', 1)[1], '--seed', seed, '--state-file', state],
                            os.path.join(d, 'emu-2.log'))
    async with aiohttp.ClientSession(url2) as s:
        async with s.get(f'{MS}/ms-a') as r:
            body = await r.json()
        check('--state-file: state survives a restart on the same port',
              body['metadata']['resourceVersion'] == ms_rv and body['metadata']['labels'] == {'f': '1'}, body)
        async with s.get('/api/v1/nodes') as r:
            lrv = (await r.json())['metadata']['resourceVersion']
        evs = await watch_lines(s, f'/api/v1/nodes?watch=true&resourceVersion={lrv}', 1, timeout=1)
        check('--state-file: watch from the last RV resumes (no 410)', evs == [], evs)
    rc = await stop(emu)
    check('SIGTERM -> exit 0', rc == 0, rc)

    # ---- webhook failure modes
    for mode, policy, want in (('deny', 'Ignore', 403), ('error', 'Ignore', 200), ('error', 'Fail', 500)):
        emu, u = await start([emu_py, '--port', '0', '--seed', seed, '--webhook-url', hooks[mode][1] + '/m',
                              '--webhook-ca', os.path.join(d, 'ca.pem'), '--webhook-failure-policy', policy],
                             os.path.join(d, f'emu-{mode}.log'))
        async with aiohttp.ClientSession(u) as s:
            async with s.patch(f'{MS}/ms-a', data=json.dumps({'metadata': {'labels': {'t': '1'}}}),
                               headers={'Content-Type': 'application/merge-patch+json'}) as r:
                st, body = r.status, await r.json()
            async with s.get('/_test/webhook-calls') as r:
                calls = await r.json()
        check(f'webhook {mode} / failurePolicy {policy} -> HTTP {want}', st == want and calls[-1]['outcome'] in
              ('denied', 'ignored-error', 'rejected-error'), (st, body, calls[-1]['outcome']))
        await stop(emu)
    # unreachable webhook with Ignore
    emu, u = await start([emu_py, '--port', '0', '--seed', seed, '--webhook-url', 'https://127.0.0.1:1/m',
                          '--webhook-ca', os.path.join(d, 'ca.pem')], os.path.join(d, 'emu-unreach.log'))
    async with aiohttp.ClientSession(u) as s:
        async with s.patch(f'{MS}/ms-a', data=json.dumps({'metadata': {'labels': {'t': '1'}}}),
                           headers={'Content-Type': 'application/merge-patch+json'}) as r:
            st, body = r.status, await r.json()
    check('unreachable webhook + Ignore -> stored unmutated', st == 200 and body['metadata']['labels'] == {'t': '1'}
          and 'annotations' not in body['metadata'], (st, body))
    await stop(emu)
    # TLS verification: wrong CA must fail (-> ignored, unmutated)
    emu, u = await start([emu_py, '--port', '0', '--seed', seed, '--webhook-url', hooks['patch'][1] + '/m'],
                         os.path.join(d, 'emu-noca.log'))
    async with aiohttp.ClientSession(u) as s:
        async with s.patch(f'{MS}/ms-a', data=json.dumps({'metadata': {'labels': {'t': '1'}}}),
                           headers={'Content-Type': 'application/merge-patch+json'}) as r:
            body = await r.json()
        async with s.get('/_test/webhook-calls') as r:
            calls = await r.json()
    check('webhook TLS is verified (system CAs do not trust the test CA)', 'annotations' not in body['metadata'] and
          'CERTIFICATE_VERIFY_FAILED' in (calls[-1]['error'] or ''), calls[-1]['error'])
    await stop(emu)
    # absent MachineConfiguration resource
    emu, u = await start([emu_py, '--port', '0', '--seed', seed, '--no-machineconfiguration'],
                         os.path.join(d, 'emu-nomc.log'))
    async with aiohttp.ClientSession(u) as s:
        async with s.get('/apis/operator.openshift.io/v1/machineconfigurations') as r:
            st, body = r.status, await r.json()
        async with s.get('/apis') as r:
            groups = [g['name'] for g in (await r.json())['groups']]
    check('--no-machineconfiguration: 404 NotFound and absent from /apis', st == 404 and body['reason'] == 'NotFound'
          and 'operator.openshift.io' not in groups, (st, body, groups))
    await stop(emu)
    for p, _ in hooks.values():
        p.terminate()
        await p.wait()
    print(f'{passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
