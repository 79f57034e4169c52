#!/usr/bin/env bash
# Renders every kustomize overlay with kubectl and lints all deploy YAML (Helm templates are linted
# only for their non-template files; tests/deploy/helm_chart.sh renders them), and checks the overlays'
# references with check-refs.py. Exit 77 (ctest skip) when kubectl or yamllint is missing.
set -euo pipefail
cd "$(dirname "$0")"
for tool in kubectl yamllint; do
  command -v "$tool" >/dev/null || { echo "deploy check: $tool not installed, skipping"; exit 77; }
done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for dir in base overlays/*; do
  name="$(echo "$dir" | tr / -)"
  kubectl kustomize "$dir" > "$out/$name.yaml"
  n="$(grep -c '^kind:' "$out/$name.yaml")"
  echo "kustomize $dir: $n objects"
  [ "$n" -gt 0 ]
done
# Every reference in a deployable overlay resolves (the base alone leaves the TLS secret to overlays).
for o in overlays-dev overlays-production overlays-dra; do
  /usr/bin/python3 check-refs.py "$out/$o.yaml"
done
# Rendered output must keep the objects the components rely on.
grep -q 'kind: KubeSchedulerConfiguration' "$out/base.yaml"
grep -q 'kind: MutatingWebhookConfiguration' "$out/overlays-production.yaml"
! grep -q 'kind: MutatingWebhookConfiguration' "$out/overlays-dev.yaml"
grep -q 'kind: DeviceClass' "$out/overlays-dra.yaml"
conf='{extends: default, rules: {line-length: {max: 120}, indentation: {indent-sequences: whatever}}}'
yamllint -s -d "$conf" base overlays components helm/hami/Chart.yaml helm/hami/values.yaml
# kubectl's rendering has no leading '---'; everything else is held to the same rules.
rendered='{extends: default, rules: {line-length: {max: 160}, document-start: disable, indentation: {indent-sequences: whatever}}}'
yamllint -s -d "$rendered" "$out"
echo "deploy check: ok"
