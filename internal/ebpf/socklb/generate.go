package socklb

//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-mcpu=v3 -O2 -g -Wall -Werror -I../../../bpf/include" -type svc_key -type svc_value -type backend -type revnat_value -type udp_revnat_key -type affinity_key -type affinity_value -type lc_key socklb ../../../bpf/socklb.c
