package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	comm, ppid, ticks, ok := parseStat("4242 (kube apiserver) S 17 4242 17 0 -1 4194560 1 0 0 0 250 75 0 0 20 0 12 0")
	require.True(t, ok)
	assert.Equal(t, "kube apiserver", comm, "a name with a space")
	assert.Equal(t, 17, ppid)
	assert.Equal(t, uint64(325), ticks, "utime plus stime")
	_, _, _, ok = parseStat("4242 (short) S 1 2")
	assert.False(t, ok, "too few fields")
	_, _, _, ok = parseStat("garbage")
	assert.False(t, ok)
}

func TestCPUSince(t *testing.T) {
	before := map[int]procCPU{1: {"fenced", 100}, 2: {"fenced", 50}, 3: {"etcd", 10}}
	after := map[int]procCPU{1: {"fenced", 300}, 2: {"fenced", 60}, 3: {"etcd", 20}, 4: {"kwok", 40}}
	got := cpuSince(before, after, 10*time.Second)
	require.Len(t, got, 3)
	assert.Equal(t, "fenced", got[0].Command)
	assert.Equal(t, 2, got[0].Processes)
	assert.InDelta(t, 2.1, got[0].CPUSeconds, 1e-9)
	assert.InDelta(t, 0.21, got[0].Share, 1e-9)
	assert.Equal(t, "kwok", got[1].Command, "started in the window: counted from zero")
	assert.InDelta(t, 0.4, got[1].CPUSeconds, 1e-9)
	assert.Equal(t, "etcd", got[2].Command)
	assert.Contains(t, renderProcessCPU(got), "| fenced | 2 | 2.1 | 0.21 |")
}

func TestProcessCPUSeesThisProcess(t *testing.T) {
	got := processCPU(os.Getpid())
	_, ok := got[os.Getpid()]
	assert.True(t, ok, "the root itself is counted")
}
