// Package demo is `svcnet demo`: the narration of the article "Demystifying
// Kubernetes Services Packet Path" on a 3-node lab (package lab). Each step
// says what it shows, shows it with real traffic from a pod or the external
// client, and checks it; Run reports every check that failed.
package demo
