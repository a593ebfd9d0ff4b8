"""Devices, errors, tuning and the CLI from Python."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tessera


def test_devices_and_selectors(device):
    infos = tessera.devices()
    assert infos and all(isinstance(i, tessera.DeviceInfo) for i in infos)
    first = infos[0]
    assert first.selector == '%d:%d' % (first.platform_index, first.device_index)
    assert first.type in ('CPU', 'GPU', 'ACCELERATOR', 'CUSTOM', 'OTHER') and first.name and first.compute_units > 0
    assert set(first.as_dict()) >= {'name', 'vendor', 'global_mem_bytes', 'unusable', 'host_cpu'}
    # a CPU device names the processor it runs on (x86: CPUID's vendor, family and model); no other device does
    import platform
    for i in infos:
        if i.type == 'CPU' and platform.machine() in ('x86_64', 'AMD64', 'i686'):
            assert ' family ' in i.host_cpu and ' model ' in i.host_cpu, i.host_cpu
        elif i.type != 'CPU':
            assert i.host_cpu == ''
    with tessera.Device(first.selector) as dev:
        assert dev.name == first.name and dev.fingerprint
        assert 'MWI=' in dev.config('gemm', 'large')['config']
    assert dev.closed
    with pytest.raises(tessera.TesseraError) as info:
        tessera.Device('no such device anywhere')
    assert info.value.status_name == 'TSR_ERR_NO_DEVICE' and info.value.status == -3
    assert first.name in info.value.message  # the message lists the devices there are
    with pytest.raises(tessera.InvalidArgument):
        tessera.Device(3)



def test_as_device(device):
    """as_device: what every op's device= reads, public for programs (the MiniLM example uses it)."""
    selector = os.environ.get('TSR_DEVICE', 'cpu')
    assert tessera.as_device(device) is device  # a Device as it is
    assert tessera.as_device() is tessera.as_device(None) is tessera.default_device()
    opened = tessera.as_device(selector)  # a selector: opened once, the same Device after
    assert isinstance(opened, tessera.Device) and not opened.closed and opened.name == device.name
    assert tessera.as_device(selector) is opened
    assert tessera.to_device(np.zeros(3, np.float32), device=selector).device is opened
    opened.close()  # a closed cached device is opened again
    again = tessera.as_device(selector)
    assert again is not opened and not again.closed and tessera.as_device(selector) is again
    for bad in (3, 1.5, True, b'cpu', ['cpu'], object()):
        with pytest.raises(tessera.InvalidArgument) as info:
            tessera.as_device(bad)
        assert info.value.message.startswith('device must be') and type(bad).__name__ in info.value.message
    with pytest.raises(tessera.InvalidArgument, match='device selector contains a NUL'):
        tessera.as_device('cp\0u')
    for _ in range(2):  # a selector that names nothing is not remembered
        with pytest.raises(tessera.TesseraError) as info:
            tessera.as_device('no such device anywhere')
        assert info.value.status_name == 'TSR_ERR_NO_DEVICE' and not isinstance(info.value, tessera.InvalidArgument)
    closed = tessera.Device(selector)
    closed.close()
    with pytest.raises(tessera.TesseraError, match='closed') as info:
        tessera.as_device(closed)
    assert not isinstance(info.value, tessera.InvalidArgument)

def test_override_and_config(device, rng):
    dev = tessera.Device('cpu')
    try:
        dev.override('gemm', 'MWI=2 VW=2 NVW=1 KU=2 WGM=4 WGN=4 KWG=8')
        assert 'tsr_config_override' in dev.config('gemm', 'large')['source']
        a, b = rng.random((20, 30), np.float32), rng.random((30, 10), np.float32)
        c = tessera.matmul(a, b, device=dev)
        assert np.allclose(c, a.astype(np.float64) @ b, atol=1e-5)
        with pytest.raises(tessera.InvalidArgument):
            dev.override('gemm', 'MWI=3000')
        with pytest.raises(tessera.TesseraError) as info:
            dev.override('nosuchop', 'MWI=2')
        assert info.value.status_name == 'TSR_ERR_NOT_FOUND'
        dev.override('gemm', None)
    finally:
        dev.close()


def test_tune_dry_run(device, tmp_path):
    seen = []
    results = tessera.tune('gelu', device=device, evaluations=3, budget=20, classes=['large'], dry_run=True,
                           db=tmp_path / 'db.json', seed=7, progress=seen.append)
    assert len(results) == 1 and results[0]['class'] == 'large' and results[0]['best'] > 0
    assert results[0]['unit'] == 'GB/s' and '=' in results[0]['best_config'] and results[0]['evaluated'] >= 1
    assert seen and seen[-1]['op'] == 'gelu'
    # GELU's classes have no second problem: no check held
    assert results[0]['second_problem'] == '' and results[0]['second_gain'] == 0
    assert results[0]['kept_before'] is False and results[0]['second_wrong'] is False
    assert not (tmp_path / 'db.json').exists()  # dry run: nothing written
    with pytest.raises(tessera.TesseraError):
        tessera.tune('nosuchop', device=device, budget=1)
    with pytest.raises(tessera.InvalidArgument):
        tessera.tune('gelu', device=device, strategy='genetic')


def test_progress_callback_exception_propagates(device, tmp_path):
    def boom(progress):
        raise KeyboardInterrupt('stop')
    with pytest.raises(KeyboardInterrupt):
        tessera.tune('gelu', device=device, evaluations=1, budget=10, classes='large', dry_run=True,
                     db=tmp_path / 'db.json', progress=boom)


def test_cli_from_python(device, tmp_path):
    proc = subprocess.run([sys.executable, '-m', 'tessera', 'devices', '--json'], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]['name'] == tessera.devices()[0].name
    rows = tessera.bench('gelu', sizes='64K', device='cpu', budget=0.05, peers=False)
    assert any(r['op'] == 'gelu' and r['impl'] == 'fused-erf' and r['time_ms'] > 0 for r in rows)
    with pytest.raises(tessera.TesseraError, match='exited 2'):
        tessera.cli('bench', 'nosuchop')


def test_profile_counts_ops_and_transfers(device):
    a = np.ones((64, 64), np.float32)
    with tessera.profile() as p:
        da = tessera.to_device(a)
        tessera.matmul(da, da)
        tessera.gelu(da, da)
        da.get()
    table = {name: (calls, sec) for name, calls, sec, share in p.table()}
    assert table['gemm'][0] == 1 and table['gelu'][0] == 1 and table['transfer'][0] == 2
    assert all(sec > 0 for _, sec in table.values())
    assert abs(sum(share for *_, share in p.table()) - 1.0) < 1e-9
    tessera.matmul(a, a)  # outside the block: not counted
    assert p.calls['gemm'] == 1


def test_report_from_python(device, tmp_path):
    # two cases of the suite (--cases; the whole suite runs in the C report tests, and here with
    # TSR_TEST_LONG=1): with empty caches the whole quick suite's programs were most of this test's time
    cases = [] if os.environ.get('TSR_TEST_LONG') == '1' else ['gelu-16M', 'layernorm-bert']
    report = tessera.report(tmp_path / 'rep', device='cpu', quick=True, budget=0.05, tune_budget=0,
                            extra=['--peak-budget', '0.05', '--peak-size', '1', '--no-peers'] +
                            (['--cases', ','.join(cases)] if cases else []))
    assert (tmp_path / 'rep' / 'report.md').is_file()
    entry = report['devices'][0]
    assert entry['info']['name'] == device.name and entry['fingerprint'] == device.fingerprint
    assert entry['results'] and entry['peaks']
    assert not cases or {row['case'] for row in entry['results']} == set(cases)
