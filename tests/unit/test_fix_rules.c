/* The rules before the model (daemon/fix_rules.c): each rule applies where
 * it should, does not where it should not, does not misfire on what only
 * looks like its case, and does not apply to its own output. */
#include <stdlib.h>
#include <string.h>

#include "fix_rules.h"
#include "unit.h"

static struct exec_result err_of(const char *ename, const char *evalue)
{
	struct exec_result r;
	memset(&r, 0, sizeof(r));
	r.status = EXEC_ERROR;
	r.has_error = true;
	r.ename = (char *)ename;
	r.evalue = (char *)evalue;
	return r;
}

static void apply(const char *ename, const char *evalue, const char *code, const char *const *files,
		  size_t n_files, struct fix_rule_outcome *o)
{
	struct exec_result r = err_of(ename, evalue);
	struct fix_rule_input in = {
	    .r = &r, .code = code, .code_len = strlen(code), .files = files, .n_files = n_files};
	fix_rules_apply(&in, o);
}

/* ---- import_alias ---- */

TEST(fix_rule_import_alias_applies)
{
	struct fix_rule_outcome o;
	apply("NameError", "name 'np' is not defined", "x = np.arange(3)\nprint(x)\n", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	CHECK_STR(o.rule, "import_alias");
	CHECK_STR(o.code, "import numpy as np\nx = np.arange(3)\nprint(x)\n");
	CHECK(o.code_len == strlen(o.code));
	CHECK(o.note && strstr(o.note, "import numpy as np"));
	CHECK(o.package == NULL);
	fix_rule_outcome_clear(&o);

	/* 3.11's "Did you mean" suffix; each alias of the table */
	static const char *const cases[][3] = {
	    {"pd", "pd.DataFrame()", "import pandas as pd\n"},
	    {"plt", "plt.plot([1])", "import matplotlib.pyplot as plt\n"},
	    {"sns", "sns.histplot([1])", "import seaborn as sns\n"},
	    {"math", "math.sqrt(2)", "import math\n"},
	    {"os", "os.listdir('.')", "import os\n"},
	    {"re", "re.match('a', 'a')", "import re\n"},
	    {"json", "json.dumps(1)", "import json\n"},
	    {"sys", "sys.version", "import sys\n"},
	    {"time", "time.time()", "import time\n"},
	    {"random", "random.random()", "import random\n"},
	    {"datetime", "datetime.date.today()", "import datetime\n"},
	    {"collections", "collections.Counter('ab')", "import collections\n"},
	    {"itertools", "list(itertools.chain([1]))", "import itertools\n"},
	    {"pathlib", "pathlib.Path('.')", "import pathlib\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char ev[128];
		snprintf(ev, sizeof(ev), "name '%s' is not defined. Did you mean: 'x'?",
			 cases[i][0]);
		apply("NameError", ev, cases[i][1], NULL, 0, &o);
		CHECK(o.kind == FIX_RULE_REPAIR);
		CHECK(o.code && strncmp(o.code, cases[i][2], strlen(cases[i][2])) == 0);
		CHECK(o.code && strcmp(o.code + strlen(cases[i][2]), cases[i][1]) == 0);
		fix_rule_outcome_clear(&o);
	}
}

TEST(fix_rule_import_alias_after_shebang_encoding_future)
{
	struct fix_rule_outcome o;
	apply(
	    "NameError", "name 'np' is not defined",
	    "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n# a comment\nfrom __future__ import "
	    "annotations\nx = np.zeros(2)\n",
	    NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	CHECK_STR(o.code, "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n# a comment\nfrom "
			  "__future__ import annotations\nimport numpy as np\nx = np.zeros(2)\n");
	fix_rule_outcome_clear(&o);
	/* a comment alone is not a header: the import goes first */
	apply("NameError", "name 'os' is not defined", "# hello\nos.getcwd()", NULL, 0, &o);
	CHECK_STR(o.code, "import os\n# hello\nos.getcwd()");
	fix_rule_outcome_clear(&o);
	/* a future import on the last line, with no newline */
	apply("NameError", "name 'os' is not defined", "from __future__ import annotations", NULL,
	      0, &o);
	CHECK(o.kind == FIX_RULE_NONE); /* os is not used as a module there */
	fix_rule_outcome_clear(&o);
}

TEST(fix_rule_import_alias_does_not_apply)
{
	struct fix_rule_outcome o;
	/* not an alias of the table */
	apply("NameError", "name 'foo' is not defined", "foo.bar()", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	CHECK(o.code == NULL && o.note == NULL && o.rule == NULL);
	/* another exception, or another message */
	apply("AttributeError", "name 'np' is not defined", "np.x", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	apply("NameError", "free variable 'np' referenced before assignment", "np.x", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	apply("NameError", "name 'np is not defined", "np.x", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
}

TEST(fix_rule_import_alias_does_not_misfire)
{
	struct fix_rule_outcome o;
	/* a variable called time, not the module */
	apply("NameError", "name 'time' is not defined", "print(time)", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* np. only as a part of another name */
	apply("NameError", "name 'np' is not defined", "x = snp.y + np", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
}

TEST(fix_rule_import_alias_not_on_its_own_output)
{
	struct fix_rule_outcome o, o2;
	apply("NameError", "name 'np' is not defined", "def f():\n    return np.ones(1)\nf()", NULL,
	      0, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	/* the same error again on the repaired code (say the import ran in
	 * another namespace): the rule sees its line there and stands back */
	apply("NameError", "name 'np' is not defined", o.code, NULL, 0, &o2);
	CHECK(o2.kind == FIX_RULE_NONE);
	fix_rule_outcome_clear(&o);
	/* the user's own import, indented inside a block, counts too */
	apply("NameError", "name 'np' is not defined",
	      "if False:\n    import numpy as np\nnp.zeros(1)", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
}

/* ---- module_report ---- */

TEST(fix_rule_module_report_applies)
{
	static const char *const cases[][2] = {
	    {"sklearn", "scikit-learn"},
	    {"cv2", "opencv-python"},
	    {"PIL", "pillow"},
	    {"yaml", "pyyaml"},
	    {"bs4", "beautifulsoup4"},
	    {"torch", "torch"},
	    {"sklearn.linear_model", "scikit-learn"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char ev[128];
		snprintf(ev, sizeof(ev), "No module named '%s'", cases[i][0]);
		struct fix_rule_outcome o;
		apply("ModuleNotFoundError", ev, "import x", NULL, 0, &o);
		CHECK(o.kind == FIX_RULE_REPORT);
		CHECK_STR(o.rule, "module_report");
		CHECK_STR(o.package, cases[i][1]);
		CHECK(o.code == NULL);
		CHECK(o.note && strstr(o.note, cases[i][1]) && strstr(o.note, "later issue"));
		fix_rule_outcome_clear(&o);
	}
}

TEST(fix_rule_module_report_does_not_apply_or_misfire)
{
	struct fix_rule_outcome o;
	apply("ImportError", "cannot import name 'foo' from 'os' (/usr/lib/python3.11/os.py)",
	      "from os import foo", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	apply("ValueError", "No module named 'x'", "x", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* a module name that is not one (what a hostile message could say) */
	apply("ModuleNotFoundError", "No module named 'x; rm -rf /'", "x", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	apply("ModuleNotFoundError", "No module named ''", "x", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
}

/* ---- file_near_miss ---- */

static const char *const ws[] = {"data/Sales.csv", "data/other.xlsx", "notes.txt",
				 "report_2024.csv"};

TEST(fix_rule_file_near_miss_applies)
{
	struct fix_rule_outcome o;
	/* case only */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data/sales.csv'",
	      "import pandas as pd\ndf = pd.read_csv('data/sales.csv')\n", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	CHECK_STR(o.rule, "file_near_miss");
	CHECK_STR(o.code, "import pandas as pd\ndf = pd.read_csv('data/Sales.csv')\n");
	CHECK(o.note && strstr(o.note, "data/Sales.csv"));
	fix_rule_outcome_clear(&o);
	/* a typo (distance 2), absolute, double quotes, twice */
	apply("FileNotFoundError",
	      "[Errno 2] No such file or directory: '/workspace/report_2042.csv'",
	      "a = open(\"/workspace/report_2042.csv\")\nb = open('/workspace/report_2042.csv')",
	      ws, 4, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	CHECK_STR(o.code, "a = open(\"/workspace/report_2024.csv\")\nb = "
			  "open('/workspace/report_2024.csv')");
	fix_rule_outcome_clear(&o);
	/* a typo in the extension (letters swapped) is still the same kind */
	static const char *const csv[] = {"data.csv", "data.tsv.bak"};
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data.cvs'",
	      "open('data.cvs')", csv, 2, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	CHECK_STR(o.code, "open('data.csv')");
	fix_rule_outcome_clear(&o);
	/* ./ prefix */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: './note.txt'",
	      "open('./note.txt')", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	CHECK_STR(o.code, "open('./notes.txt')");
	fix_rule_outcome_clear(&o);
}

TEST(fix_rule_file_near_miss_does_not_apply)
{
	struct fix_rule_outcome o;
	/* three edits away */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'repart_2042.csv'",
	      "open('repart_2042.csv')", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* a name with a quote in it is not looked for among literals */
	static const char *const q[] = {"it's.csv"};
	apply("FileNotFoundError", "[Errno 2] No such file or directory: \"its.csv\"",
	      "open(\"its.csv\")", q, 1, &o);
	CHECK(o.kind == FIX_RULE_REPAIR); /* the listed name may have one */
	fix_rule_outcome_clear(&o);
	apply("FileNotFoundError", "[Errno 2] No such file or directory: \"it's.cvs\"",
	      "open(\"it's.cvs\")", q, 1, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* nothing close */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'zzz.csv'",
	      "open('zzz.csv')", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* the literal is not in the code (the path was built) */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data/sales.csv'",
	      "open(os.path.join('data', 'sales.csv'))", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* another directory */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'sales.csv'",
	      "open('sales.csv')", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* outside the workspace */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: '/etc/notes.txt'",
	      "open('/etc/notes.txt')", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* no files */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'note.txt'",
	      "open('note.txt')", NULL, 0, &o);
	CHECK(o.kind == FIX_RULE_NONE);
}

TEST(fix_rule_file_near_miss_does_not_misfire)
{
	struct fix_rule_outcome o;
	/* two near misses: a guess, not a repair */
	static const char *const two[] = {"data1.csv", "data2.csv"};
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data3.csv'",
	      "open('data3.csv')", two, 2, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* another extension is another kind of file */
	static const char *const tsv[] = {"data.tsv"};
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data.csv'",
	      "open('data.csv')", tsv, 1, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	/* a directory walk out of the workspace */
	static const char *const up[] = {"../x.txt"};
	apply("FileNotFoundError", "[Errno 2] No such file or directory: '../y.txt'",
	      "open('../y.txt')", up, 1, &o);
	CHECK(o.kind == FIX_RULE_NONE);
}

TEST(fix_rule_file_near_miss_not_on_its_own_output)
{
	struct fix_rule_outcome o, o2;
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data/sales.csv'",
	      "open('data/sales.csv')", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_REPAIR);
	/* the repaired code failing the same way names a file that is listed */
	apply("FileNotFoundError", "[Errno 2] No such file or directory: 'data/Sales.csv'", o.code,
	      ws, 4, &o2);
	CHECK(o2.kind == FIX_RULE_NONE);
	fix_rule_outcome_clear(&o);
}

TEST(fix_rules_nothing_for_other_failures)
{
	struct fix_rule_outcome o;
	apply("ZeroDivisionError", "division by zero", "1/0", ws, 4, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	struct exec_result r;
	memset(&r, 0, sizeof(r));
	r.status = EXEC_TIMEOUT;
	struct fix_rule_input in = {.r = &r, .code = "x", .code_len = 1};
	fix_rules_apply(&in, &o);
	CHECK(o.kind == FIX_RULE_NONE);
	fix_rule_outcome_clear(&o); /* NONE: nothing to free, and clearing is safe */
	fix_rule_outcome_clear(NULL);
}
