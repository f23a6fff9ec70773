// Package diagram draws a packet trace (package trace) as a picture, in the
// spirit of the figures of "The Packet's-Eye View of a Kubernetes Service":
// one lane per place the packet passes (the sender on the left, the nodes,
// the receiver on the right), arrows between places labelled with the packet's
// tuple as it travels and the route that sent it, every rewrite highlighted
// on the lane where it happened (the rule that did it, the mark that asked for
// a masquerade), the endpoint choice as a small table, the reply's way back as
// dashed arrows with conntrack's reverse translations, and the verdict.
//
// Two renderings share that story: SVG (a self-contained image, sized from
// its content) and Mermaid (a sequenceDiagram for Markdown). Both are pure
// functions of the Trace: the same trace gives the same bytes.
package diagram
