# ci-ctl sources, included by the top-level Makefile, which builds them
# into build/ci-ctl with $(shell pkg-config --cflags --libs libcurl yajl)
# and links lib/'s archive (errors, allocation, JSON, buffers, codecs).
CLI_SRCS := cli/main.c cli/cli.c cli/client.c cli/output.c \
	cli/util.c cli/cmd_session.c cli/cmd_exec.c cli/cmd_files.c \
	cli/cmd_health.c cli/cmd_admin.c cli/cmd_keys.c \
	cli/cmd_version.c \
	cli/cmd_audit.c \
	cli/cmd_run.c \
	cli/cmd_quota.c \
	cli/cmd_failures.c \
	cli/cmd_reviews.c \
	cli/cmd_install.c \
	cli/cmd_snapshot.c \
	cli/cmd_nodes.c
