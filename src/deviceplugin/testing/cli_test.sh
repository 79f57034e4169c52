#!/bin/sh
# `hami device-plugin` from the outside: --help documents every flag, --dry-run finds the fake
# libnvidia-ml.so.1 through the normal library search (LD_LIBRARY_PATH) and prints the annotations.
# usage: cli_test.sh <hami binary> <directory of the fake libnvidia-ml.so.1>
set -u
hami=$1
fakes=$2
fail() { echo "FAIL: $*"; exit 1; }

help=$("$hami" device-plugin --help) || fail "--help exited $?"
for flag in --kubeconfig --node-name --plugin-dir --split-count --config --libvgpu-path --region-root \
            --resource-name --device-memory-scaling --device-cores-scaling --nvml-library --dry-run \
            --device-list-strategy --device-id-strategy --cdi-annotation-prefix --cdi-kind --mig-strategy; do
  echo "$help" | grep -q -- "$flag" || fail "--help does not document $flag"
done

state=$(mktemp /tmp/hami-cli-test.XXXXXX)
out=$(LD_LIBRARY_PATH="$fakes" FAKEGPU_STATE="$state" FAKEGPU_DEVICES="Tesla T4:15360:40;Tesla T4:15360:40" \
      FAKEGPU_NVLINK="0-1:2" "$hami" device-plugin --dry-run --split-count 5 --enable-topology-score 2>&1)
rc=$?
rm -f "$state"
[ $rc -eq 0 ] || fail "--dry-run exited $rc: $out"
echo "$out" | grep -q '"id":"GPU-fa4e0000-0000-4000-8000-000000000001","index":1,"count":5,"devmem":15360' \
  || fail "register annotation: $out"
echo "$out" | grep -q '"type":"NVIDIA-Tesla T4"' || fail "model: $out"
echo "$out" | grep -q ':250}' || fail "link score of 2 NVLinks + single switch: $out"

# device-config.yaml's device plugin knobs apply where no flag is given; a flag wins over the file.
dc=$(mktemp /tmp/hami-cli-dc.XXXXXX)
printf 'nvidia:\n  resourceCountName: nvidia.com/gpu\n  deviceSplitCount: 7\n  deviceMemoryScaling: 2\n' > "$dc"
state=$(mktemp /tmp/hami-cli-test.XXXXXX)
out=$(LD_LIBRARY_PATH="$fakes" FAKEGPU_STATE="$state" FAKEGPU_DEVICES="Tesla T4:15360:40" \
      "$hami" device-plugin --dry-run --device-config-file "$dc" 2>&1) || fail "--dry-run with a device config: $out"
echo "$out" | grep -q '"count":7,"devmem":30720' || fail "deviceSplitCount/deviceMemoryScaling from the file not applied: $out"
out=$(LD_LIBRARY_PATH="$fakes" FAKEGPU_STATE="$state" FAKEGPU_DEVICES="Tesla T4:15360:40" \
      "$hami" device-plugin --dry-run --device-config-file "$dc" --split-count 3 2>&1) || fail "--dry-run: $out"
echo "$out" | grep -q '"count":3,"devmem":30720' || fail "--split-count does not win over deviceSplitCount: $out"
rm -f "$dc" "$state"

out=$("$hami" device-plugin --dry-run --split-count 0 2>&1) && fail "--split-count 0 accepted"
echo "$out" | grep -q "split count 0" || fail "error does not name the option: $out"
out=$("$hami" device-plugin --dry-run --fail-on-init-error --nvml-library libnvidia-ml-missing.so.1 2>&1) \
  && fail "missing NVML accepted with --fail-on-init-error"
echo "$out" | grep -q "libnvidia-ml-missing.so.1" || fail "error does not name the library: $out"
# The device list strategy: a value NVIDIA's plugin does not know fails at start naming the option,
# from the flag, its environment variable or device-config.yaml; the known ones start.
out=$("$hami" device-plugin --dry-run --device-list-strategy cdi 2>&1) && fail "--device-list-strategy cdi accepted"
echo "$out" | grep -q -- '--device-list-strategy: device list strategy "cdi" is not one of' \
  || fail "error does not name --device-list-strategy: $out"
out=$(DEVICE_LIST_STRATEGY=cdi "$hami" device-plugin --dry-run 2>&1) && fail "DEVICE_LIST_STRATEGY=cdi accepted"
echo "$out" | grep -q -- '--device-list-strategy' || fail "env error does not name the option: $out"
dc=$(mktemp /tmp/hami-cli-dc.XXXXXX)
printf 'nvidia:\n  deviceListStrategy: cdi\n' > "$dc"
out=$("$hami" device-plugin --dry-run --device-config-file "$dc" 2>&1) && fail "deviceListStrategy: cdi accepted"
echo "$out" | grep -q 'nvidia.deviceListStrategy' || fail "file error does not name the option: $out"
rm -f "$dc"
out=$("$hami" device-plugin --dry-run --device-id-strategy name 2>&1) && fail "--device-id-strategy name accepted"
echo "$out" | grep -q -- '--device-id-strategy' || fail "error does not name --device-id-strategy: $out"
state=$(mktemp /tmp/hami-cli-test.XXXXXX)
out=$(LD_LIBRARY_PATH="$fakes" FAKEGPU_STATE="$state" FAKEGPU_DEVICES="Tesla T4:15360:40" \
      "$hami" device-plugin --dry-run --device-list-strategy cdi-annotations,cdi-cri --device-id-strategy index 2>&1) \
  || fail "--device-list-strategy cdi-annotations,cdi-cri: $out"
rm -f "$state"
# Static MIG strategies: a value that is not none, single or mixed fails at start naming the option
# (flag or MIG_STRATEGY); a GPU with MIG on and no MIG device is refused naming the GPU and the fix;
# GPUs with MIG off stay shared.
out=$("$hami" device-plugin --dry-run --mig-strategy Mixed 2>&1) && fail "--mig-strategy Mixed accepted"
echo "$out" | grep -q -- "MIG strategy 'Mixed' (--mig-strategy, nodeconfig migstrategy) must be none, single or mixed" \
  || fail "error does not name --mig-strategy: $out"
out=$(MIG_STRATEGY=all "$hami" device-plugin --dry-run 2>&1) && fail "MIG_STRATEGY=all accepted"
echo "$out" | grep -q -- "--mig-strategy" || fail "env error does not name the option: $out"
state=$(mktemp /tmp/hami-cli-test.XXXXXX)
rm -f "$state"
out=$(LD_LIBRARY_PATH="$fakes" FAKEGPU_STATE="$state" FAKEGPU_MIG=0 \
      FAKEGPU_DEVICES="NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40" \
      "$hami" device-plugin --dry-run --mig-strategy mixed 2>&1) && fail "MIG GPU without MIG devices accepted"
echo "$out" | grep -q "GPU 0 (GPU-fa4e0000-0000-4000-8000-000000000000) has MIG on but no MIG device" \
  || fail "error does not name the GPU: $out"
rm -f "$state"
out=$(LD_LIBRARY_PATH="$fakes" FAKEGPU_STATE="$state" \
      FAKEGPU_DEVICES="NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40" \
      "$hami" device-plugin --dry-run --mig-strategy single 2>&1) || fail "--mig-strategy single without MIG GPUs: $out"
echo "$out" | grep -q '"id":"GPU-fa4e0000-0000-4000-8000-000000000001","index":1' || fail "GPUs with MIG off not shared: $out"
rm -f "$state"
echo "ok"
