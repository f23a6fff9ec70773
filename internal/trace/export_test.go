package trace

// CheckSocket is checkSocket, for the kernel tests of package trace_test.
var CheckSocket = checkSocket

// NodeCgroup is nodeCgroup, for the kernel tests of package trace_test.
var NodeCgroup = nodeCgroup
