//go:build test_performance

package scheduling_test

// Karpenter's scheduler on the very pods karpy's benchmark solves: each KB_PODS entry is a JSON
// file written by benchmarks/scheduling.py --dump (plain pods: uid, cpu, memory, labels), or
// diverse:N for Karpenter's own makeDiversePods(N). The scheduler is set up as Karpenter's
// benchmarkScheduler sets it up (setupScheduler: fake.InstanceTypes(400), one NodePool, five
// concurrent reconciles); only Solve is timed, wall and process CPU, median of KB_REPEAT runs.
// The price is each NodeClaim's cheapest available offering, summed.
//
// benchmarks/karpenter/build.sh copies this file into Karpenter's module and builds the binary.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	psched "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"
)


type jsonPod struct {
	UID    string            `json:"uid"`
	CPU    string            `json:"cpu"`
	Memory string            `json:"memory"`
	Labels map[string]string `json:"labels"`
}

func TestJSONPods(t *testing.T) {
	repeat, _ := strconv.Atoi(os.Getenv("KB_REPEAT"))
	if repeat < 1 {
		repeat = 3
	}
	for _, path := range strings.Split(os.Getenv("KB_PODS"), ",") {
		var pods []*corev1.Pod
		var specs []jsonPod
		if n, ok := strings.CutPrefix(path, "diverse:"); ok {
			count, _ := strconv.Atoi(n)
			pods = makeDiversePods(count) // Karpenter's own generator
		} else {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &specs); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range specs {
			pods = append(pods, test.Pod(test.PodOptions{
				ObjectMeta: metav1.ObjectMeta{Labels: s.Labels, UID: types.UID(s.UID)},
				ResourceRequirements: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(s.CPU),
					corev1.ResourceMemory: resource.MustParse(s.Memory),
				}},
			}))
		}
		var times, cpus []float64
		nodes, price := 0, 0.0
		for i := 0; i < repeat; i++ {
			ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
			s, err := setupScheduler(ctx, pods, psched.NumConcurrentReconciles(5))
			if err != nil {
				t.Fatal(err)
			}
			cpu0 := cpuSeconds()
			start := time.Now()
			results, err := s.Solve(ctx, pods)
			times = append(times, time.Since(start).Seconds())
			cpus = append(cpus, cpuSeconds()-cpu0)
			if err != nil || len(results.PodErrors) > 0 {
				t.Fatalf("not all pods scheduled: %v %d", err, len(results.PodErrors))
			}
			nodes, price = len(results.NewNodeClaims), 0
			for _, n := range results.NewNodeClaims {
				best := -1.0
				for _, it := range n.InstanceTypeOptions {
					if c := it.Offerings.Available().Cheapest(); c != nil && (best < 0 || c.Price < best) {
						best = c.Price
					}
				}
				price += best
			}
		}
		sort.Float64s(times)
		sort.Float64s(cpus)
		med, cmed := times[len(times)/2], cpus[len(cpus)/2]
		fmt.Printf("karpenter %s pods=%d nodes=%d price=%.2f median=%.3fs pods/s=%.0f cpu=%.3fs pods/cpu-s=%.0f runs=%v\n", path, len(pods), nodes, price, med, float64(len(pods))/med, cmed, float64(len(pods))/cmed, times)
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
