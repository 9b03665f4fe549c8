"""Write an audit set's report to a file: the JSON the download gives (the same bytes), or the
HTML page as one file with its styles inline. An existing file is kept unless --force."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from grading.audit_report import report_json
from webapp.audit.report import report_file_html, set_report
from webapp.models import AuditSet
from webapp.rankings import UNRESTRICTED


class Command(BaseCommand):
    help = "Write the report of an audit set as JSON or HTML."

    def add_arguments(self, parser):
        parser.add_argument("--set", required=True, dest="set_name", help="the audit set's name")
        parser.add_argument("--format", required=True, choices=["json", "html"])
        parser.add_argument("--out", required=True, help="the file to write")
        parser.add_argument("--as-of", help="a time to write into the report, as given (none by default)")
        parser.add_argument("--force", action="store_true", help="replace the file if it exists")

    def handle(self, *args, **options):
        audit_set = AuditSet.objects.select_related("batch", "run").filter(name=options["set_name"]).first()
        if audit_set is None:
            raise CommandError(f"set: no audit set named {options['set_name']!r}")
        out = Path(options["out"])
        if out.exists() and not options["force"]:
            raise CommandError(f"out: {out} exists; give --force to replace it")
        if options["format"] == "json":
            out.write_bytes(report_json(set_report(audit_set, viewer=UNRESTRICTED, as_of=options["as_of"]).data))
        else:
            out.write_text(report_file_html(audit_set, viewer=UNRESTRICTED, as_of=options["as_of"]), encoding="utf-8")
        self.stdout.write(f"{options['format']} report of {audit_set.name!r} written to {out}")
