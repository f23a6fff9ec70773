// Package image builds OCI container images without Docker or a registry, on
// github.com/google/go-containerregistry: an Image is layers (a directory
// tree, single files with their modes, owners and file capabilities, or an
// existing tar) plus a configuration (entrypoint, command, environment,
// working directory, user) and the references it is tagged with. A Builder
// writes it as an archive that is both an OCI image layout and a
// docker-archive (as `docker save` writes since Docker 25), which `ctr images
// import`, `docker load` and `podman load` read, into a cache keyed by
// content.
//
// Builds are reproducible: layer entries are sorted, every time stamp is the
// Unix epoch, owner names are dropped, and the configuration carries no build
// time, so the same inputs (and the same Go release, whose gzip output the
// layer digests depend on) give the same image digest and a byte-identical
// archive. A cache hit costs one read of the inputs to hash them; compressed
// layers are cached by their uncompressed digest, so images sharing a base
// compress it once.
package image
