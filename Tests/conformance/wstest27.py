# Runs Autobahn|Testsuite's `wstest` (a Python 2.7 program) from a folder that
# `pip --target` filled. Such a folder is not a site directory, so its .pth files
# (zope's namespace package) would be ignored without site.addsitedir.
import site
import sys

site.addsitedir(sys.argv.pop(1))
from autobahntestsuite.wstest import run  # noqa: E402

sys.exit(run())
