package tclb

//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-mcpu=v3 -O2 -g -Wall -Werror -I../../../bpf/include" -type svc_key -type svc_value -type backend_key -type backend_value -type conn_key -type conn_value -type rev_value -type node_config tclb ../../../bpf/tclb.c
