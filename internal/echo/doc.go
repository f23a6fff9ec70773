// Package echo is the server every lab pod runs (svcnet echo), in the manner of
// Kubernetes' agnhost netexec, and the client helpers the lab and tests use to
// talk to it from inside a namespace.
//
// # Protocol
//
// TCP ports speak HTTP or a line protocol, chosen per connection by its first
// bytes (Sniff): a connection is HTTP when it begins with one of the methods
// GET, POST, HEAD, PUT, DELETE, OPTIONS or PATCH followed by a space. While the
// bytes received so far are a proper prefix of such a token the server waits
// for more, at most SniffTimeout; any other first bytes (or that timeout)
// select the line protocol. The server waits for the first byte as long as the
// connection stays open.
//
// HTTP paths (any method; HEAD gets headers only):
//
//	/          one JSON line {"pod":NAME,"node":NODE,"podIP":IP,"client":"IP:PORT","server":"IP:PORT"}
//	/hostname  NAME
//	/clientip  IP:PORT of the client as the server saw it
//	/readyz    ok      (also /healthz)
//	other      404
//
// Line protocol commands (a line without its "\n" and one trailing "\r"):
//
//	hostname   -> NAME
//	clientip   -> IP:PORT
//	whoami     -> the JSON of GET / on one line: pod, node, podIP, client, and
//	              server (on UDP the pod's IP with the port the datagram came to)
//	echo X     -> X
//
// On TCP the exact rule is (Lines): input is cut into lines at "\n". A line
// that is a command is answered with the answer and "\n"; any other line is
// written back verbatim, terminator included. Bytes not (yet) ending in "\n"
// are held only while they could still become a command line: while, without
// one trailing "\r", they are a prefix of "hostname", "clientip", "whoami"
// or "echo ", or begin with "echo ", and are shorter than MaxHold. Anything
// else is written back at once, so arbitrary bytes without newlines echo
// immediately; bytes written back this way end the current line for the
// protocol, and what follows them starts a new one. Held bytes become a
// final line when the client half-closes, or after HoldTimeout without new
// data; as a line they
// are answered as above (a command gets its answer and "\n", anything else
// comes back verbatim, with no terminator added). The server closes the
// connection after the client's EOF.
//
// On UDP each datagram is one message (Datagram): if, without one trailing "\n"
// and then one "\r", it is a command, the reply is the bare answer (no
// newline); otherwise the datagram comes back verbatim. Replies leave from the
// socket the datagram arrived on, bound to the wildcard address: the kernel
// picks the source address by routing, which for a DNATed Service flow is
// right because conntrack reverses the translation.
package echo
