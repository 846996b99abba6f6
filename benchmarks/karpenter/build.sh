#!/bin/sh
# Builds Karpenter's scheduling benchmark with json_benchmark_test.go beside it, then runs it on
# pods dumped by benchmarks/scheduling.py. Usage:
#   benchmarks/karpenter/build.sh [VERSION] [WORKDIR]    (default v1.14.1, /tmp/karpenter-bench)
#   python benchmarks/scheduling.py --dump DIR --mixes plain --sizes 1000,5000,20000
#   cd WORKDIR/karpenter/pkg/controllers/provisioning/scheduling &&
#     KB_PODS=DIR/plain-1000.json,diverse:1000 KB_REPEAT=3 WORKDIR/sched.test -test.run TestJSONPods
set -eu
version=${1:-v1.14.1}
work=${2:-/tmp/karpenter-bench}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cd "$work"
dir=$(go mod download -json "sigs.k8s.io/karpenter@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
rm -rf karpenter
cp -r "$dir" karpenter
chmod -R u+w karpenter
cp "$here/json_benchmark_test.go" karpenter/pkg/controllers/provisioning/scheduling/
cd karpenter
go test -tags=test_performance -c -o "$work/sched.test" ./pkg/controllers/provisioning/scheduling/
echo "built $work/sched.test from sigs.k8s.io/karpenter@$version"
