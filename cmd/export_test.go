package cmd

// ProcTreeCPU is procTreeCPU, for the benchmarks of package cmd_test.
var ProcTreeCPU = procTreeCPU
