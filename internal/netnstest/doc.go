// Package netnstest builds small networks of Linux network namespaces for
// tests that run real servers the way they run in production, each on its
// own address: namespaces joined by veth pairs to a bridge that lives in
// a namespace of its own. Nothing is routed off the machine: the
// namespaces have no default route and the root namespace is not on the
// bridge. Everything is torn down when the test ends, and the processes
// started in the namespaces are killed by process group.
//
// It needs root (CAP_NET_ADMIN): without it the test is skipped; as root,
// where namespaces cannot be made, it is skipped too, but fails under make
// test (HOLDLINE_REQUIRE_MODELS=1).
//
// The processes a test starts run through `ip netns exec`: Node.Command
// makes the command, Node.Start starts it and ties it to the test. A test
// that must itself run inside a namespace (Go cannot move a goroutine into
// one safely) runs its own binary again there, passing the namespaces
// with Net.Env; FromEnv reads them back.
package netnstest
