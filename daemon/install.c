/* install.c: the pure parts of a time-boxed install: which specs pip may
 * be given, the index's host, the script the sandbox runs, and reading its
 * report back. No I/O; unit-tested (tests/unit/test_install.c). The flow
 * (the window, the execution) is manager_install.c. */
#include "install.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "netpolicy.h"
#include "xalloc.h"

void install_request_release(struct install_request *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->n_specs; i++)
		free(r->specs[i]);
	free(r->specs);
	memset(r, 0, sizeof(*r));
}

void install_result_release(struct install_result *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->n_pkgs; i++) {
		free(r->pkgs[i].name);
		free(r->pkgs[i].version);
	}
	free(r->pkgs);
	r->pkgs = NULL;
	r->n_pkgs = 0;
}

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

static bool version_char(char c)
{
	return c != '\0' && (isalnum((unsigned char)c) || strchr(".*+!_-", c) != NULL);
}

/* The length of the operator at p, or 0. */
static size_t op_len(const char *p)
{
	static const char *const ops[] = {"===", "==", "!=", "<=", ">=", "~=", "<", ">"};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strncmp(p, ops[i], strlen(ops[i])) == 0)
			return strlen(ops[i]);
	return 0;
}

int install_check_spec(const char *spec, struct err **errp)
{
	size_t len = strlen(spec);
	if (len == 0)
		return err_set(errp, ERR_BAD_REQUEST, "pip: an empty requirement");
	if (len > INSTALL_SPEC_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "pip: a requirement longer than %d bytes",
			       INSTALL_SPEC_MAX);
	const char *p = spec;
	size_t n = 0;
	while (name_char(p[n]))
		n++;
	if (n == 0 || !isalnum((unsigned char)p[0]) || !isalnum((unsigned char)p[n - 1]) ||
	    n > INSTALL_NAME_MAX)
		return err_set(errp, ERR_BAD_REQUEST,
			       "pip: \"%.*s\" does not start with a package name (letters, digits, "
			       "'.', '_', '-'; NAME or NAME==VERSION)",
			       (int)len, spec);
	p += n;
	while (*p) {
		size_t o = op_len(p);
		if (o == 0)
			return err_set(
			    errp, ERR_BAD_REQUEST,
			    "pip: \"%s\": expected a version clause (==, >=, ...) after the "
			    "name; URLs, paths, extras, markers and options are not accepted",
			    spec);
		p += o;
		size_t v = 0;
		while (version_char(p[v]))
			v++;
		if (v == 0 || v > INSTALL_VERSION_MAX)
			return err_set(errp, ERR_BAD_REQUEST, "pip: \"%s\": a bad version", spec);
		p += v;
		if (*p == ',' && p[1] == '\0')
			return err_set(errp, ERR_BAD_REQUEST, "pip: \"%s\": a clause after ','",
				       spec);
		if (*p == ',')
			p++;
		else if (*p)
			return err_set(errp, ERR_BAD_REQUEST, "pip: \"%s\": unexpected '%c'", spec,
				       *p);
	}
	return 0;
}

int install_index_authority(const char *url, char *out, size_t size, struct err **errp)
{
	int def;
	const char *rest;
	if (strncmp(url, "http://", 7) == 0) {
		def = 80;
		rest = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		def = 443;
		rest = url + 8;
	} else {
		return err_set(errp, ERR_BAD_REQUEST,
			       "pip-index-url: expected an http:// or https:// URL");
	}
	for (const char *q = url; *q; q++)
		if ((unsigned char)*q < 0x21 || *q == '\'' || *q == '"' || *q == '\\' || *q == 0x7f)
			return err_set(errp, ERR_BAD_REQUEST,
				       "pip-index-url: spaces, quotes, backslashes and control "
				       "characters are not allowed");
	size_t alen = strcspn(rest, "/?#");
	if (alen == 0 || alen >= 300)
		return err_set(errp, ERR_BAD_REQUEST, "pip-index-url: no host");
	char authority[300];
	memcpy(authority, rest, alen);
	authority[alen] = '\0';
	if (strchr(authority, '@'))
		return err_set(errp, ERR_BAD_REQUEST,
			       "pip-index-url: credentials in the URL are not supported");
	char host[NETPOLICY_HOST_MAX + 1];
	int port;
	if (netpolicy_split(authority, def, host, sizeof(host), &port, errp) < 0) {
		err_wrap(errp, "pip-index-url");
		return -1;
	}
	if (netpolicy_host_kind(host) == NETPOLICY_IPV6)
		snprintf(out, size, "[%s]:%d", host, port);
	else
		snprintf(out, size, "%s:%d", host, port);
	if (netpolicy_check_entry(out, errp) < 0) {
		err_wrap(errp, "pip-index-url");
		return -1;
	}
	return 0;
}

/* Runs in the kernel, as the sandbox user. Everything is inside one
 * function that deletes itself, so the session's namespace keeps nothing.
 * pip is a child process with the window as its timeout (killed when it
 * passes); the daemon closes the egress at the same deadline on its own
 * and does not rely on this. */
static const char script_fmt[] =
    "def _ci_install():\n"
    "    import importlib, importlib.metadata as md, os, subprocess, sys, time\n"
    "    site, url, specs, window = '" INSTALL_SITE "', '%s', [%s], %lld\n"
    "    os.makedirs(site, exist_ok=True)\n"
    "    if site not in sys.path:\n"
    "        root = os.environ.get('SANDBOX_WORKSPACE', '/workspace')\n"
    "        sys.path.insert(sys.path.index(root) + 1 if root in sys.path else len(sys.path), "
    "site)\n"
    "    def dists():\n"
    "        out = {}\n"
    "        for d in md.distributions(path=[site]):\n"
    "            n = (d.metadata['Name'] or '').lower().replace('_', '-')\n"
    "            if n:\n"
    "                out[n] = (d.metadata['Name'], d.version)\n"
    "        return out\n"
    "    before = dists()\n"
    "    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK='1', PIP_NO_INPUT='1')\n"
    "    argv = [sys.executable, '-m', 'pip', 'install', '--no-cache-dir', '--upgrade',\n"
    "            '--no-warn-script-location', '--progress-bar', 'off', '--target', site,\n"
    "            '--index-url', url, '--only-binary=:all:']\n"
    "    if url.startswith('http://'):\n"
    "        argv += ['--trusted-host', url.split('/')[2]]  # plain HTTP: the operator's choice\n"
    "    argv += ['--'] + specs\n"
    "    t0 = time.monotonic()\n"
    "    status, rc, tail = 'ok', 0, ''\n"
    "    try:\n"
    "        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,\n"
    "                           stderr=subprocess.STDOUT, env=env, timeout=window)\n"
    "        rc, tail = p.returncode, p.stdout.decode('utf-8', 'replace')[-1500:]\n"
    "        if rc != 0:\n"
    "            status = 'failed'\n"
    "    except subprocess.TimeoutExpired as e:\n"
    "        status, rc = 'timeout', -1\n"
    "        tail = (e.output or b'').decode('utf-8', 'replace')[-1500:]\n"
    "    pip_ms = int((time.monotonic() - t0) * 1000)\n"
    "    importlib.invalidate_caches()\n"
    "    after = dists()\n"
    "    want = [s.split('=')[0].split('<')[0].split('>')[0].split('!')[0].split('~')[0]"
    ".lower().replace('_', '-') for s in specs]\n"
    "    shown = [n for n in want if n in after]\n"
    "    shown += [n for n in sorted(after) if n not in shown and after[n] != before.get(n)]\n"
    "    for n in shown:\n"
    "        print('\\x1eci-pkg\\t%%s\\t%%s' %% after[n])\n"
    "    if status != 'ok':\n"
    "        sys.stderr.write(tail)\n"
    "    print('\\x1eci-install\\t%%s\\t%%d\\t%%d' %% (status, rc, pip_ms))\n"
    "try:\n"
    "    _ci_install()\n"
    "finally:\n"
    "    del _ci_install\n";

char *install_script(const char *index_url, char *const *specs, size_t n_specs, int64_t window_s)
{
	struct buf list;
	buf_init(&list, (size_t)INSTALL_MAX_SPECS * (INSTALL_SPEC_MAX + 4) + 1);
	for (size_t i = 0; i < n_specs && i < INSTALL_MAX_SPECS; i++) {
		if (i)
			buf_append(&list, ", ", 2);
		buf_append(&list, "'", 1);
		buf_append(&list, specs[i], strlen(specs[i]));
		buf_append(&list, "'", 1);
	}
	char *names = buf_steal(&list, NULL);
	char *s = xasprintf(script_fmt, index_url, names, (long long)window_s);
	free(names);
	return s;
}

/* Keep in step with script_fmt's argv (tests/unit/test_install.c checks
 * that each option here is in the script too). */
char **install_pip_args(const char *index_url, char *const *specs, size_t n_specs, size_t *n)
{
	static const char *const head[] = {
	    "install",        "--no-cache-dir",
	    "--upgrade",      "--no-warn-script-location",
	    "--progress-bar", "off",
	    "--target",       INSTALL_SITE,
	    "--index-url",
	};
	size_t nh = sizeof(head) / sizeof(head[0]);
	char **a = xcalloc(nh + 6 + n_specs + 1, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < nh; i++)
		a[k++] = xstrdup(head[i]);
	a[k++] = xstrdup(index_url);
	a[k++] = xstrdup("--only-binary=:all:");
	if (strncmp(index_url, "http://", 7) == 0) {
		/* plain HTTP: the operator's choice; the host as the script takes it */
		const char *h = index_url + 7;
		a[k++] = xstrdup("--trusted-host");
		a[k++] = xstrndup(h, strcspn(h, "/"));
	}
	a[k++] = xstrdup("--");
	for (size_t i = 0; i < n_specs; i++)
		a[k++] = xstrdup(specs[i]);
	a[k] = NULL;
	*n = k;
	return a;
}

void install_args_free(char **args)
{
	if (args == NULL)
		return;
	for (size_t i = 0; args[i]; i++)
		free(args[i]);
	free(args);
}

static bool field_ok(const char *s, size_t n, size_t max, bool (*ok)(char))
{
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!ok(s[i]))
			return false;
	return true;
}

static bool version_ok_char(char c)
{
	return version_char(c);
}

static bool name_ok_char(char c)
{
	return name_char(c);
}

void install_parse_report(const char *out, size_t len, struct install_result *r, char *status,
			  size_t status_size, int *rc)
{
	status[0] = '\0';
	*rc = 0;
	const char *p = out, *end = out + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		size_t n = (size_t)(le - p);
		char line[512];
		if (n > 0 && n < sizeof(line) && p[0] == '\x1e') {
			memcpy(line, p + 1, n - 1);
			line[n - 1] = '\0';
			char *f[5] = {0};
			size_t nf = 0;
			char *save = NULL;
			for (char *t = strtok_r(line, "\t", &save); t && nf < 5;
			     t = strtok_r(NULL, "\t", &save))
				f[nf++] = t;
			if (nf == 3 && strcmp(f[0], "ci-pkg") == 0 &&
			    field_ok(f[1], strlen(f[1]), INSTALL_NAME_MAX, name_ok_char) &&
			    field_ok(f[2], strlen(f[2]), INSTALL_VERSION_MAX, version_ok_char)) {
				if (r->n_pkgs >= INSTALL_MAX_PKGS) {
					r->pkgs_truncated = true;
				} else {
					r->pkgs =
					    xrealloc(r->pkgs, (r->n_pkgs + 1) * sizeof(*r->pkgs));
					r->pkgs[r->n_pkgs].name = xstrdup(f[1]);
					r->pkgs[r->n_pkgs].version = xstrdup(f[2]);
					r->n_pkgs++;
				}
			} else if (nf == 4 && strcmp(f[0], "ci-install") == 0 &&
				   (strcmp(f[1], "ok") == 0 || strcmp(f[1], "timeout") == 0 ||
				    strcmp(f[1], "failed") == 0)) {
				char *e1 = NULL, *e2 = NULL;
				long code = strtol(f[2], &e1, 10);
				long long ms = strtoll(f[3], &e2, 10);
				if (*f[2] && *e1 == '\0' && *f[3] && *e2 == '\0' && code >= -1000 &&
				    code <= 1000 && ms >= 0 && ms < 86400000LL * 30) {
					snprintf(status, status_size, "%s", f[1]);
					*rc = (int)code;
					r->pip_ms = ms;
				}
			}
		}
		p = nl ? nl + 1 : end;
	}
}
