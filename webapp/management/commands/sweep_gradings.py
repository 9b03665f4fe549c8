from django.core.management.base import BaseCommand, CommandError

from webapp.exports.services import exports_sweep
from webapp.grading.services import gradings_sweep


class Command(BaseCommand):
    help = ("Re-queue running gradings and exports whose worker stopped renewing their lease, send the "
            "messages of queued ones that have none (a broker outage kept them back, or the broker lost them) "
            "and re-send overdue ones. The worker's beat runs this every GAGAR_SWEEP_INTERVAL seconds; "
            "a deployment without beat runs it from cron.")

    def add_arguments(self, parser):
        parser.add_argument("--resend-after", type=float, help="seconds (default GAGAR_GRADING_RESEND_AFTER)")

    def handle(self, *args, resend_after, **options):
        sweep = gradings_sweep(resend_after=resend_after)
        self.stdout.write(f"{sweep.requeued} re-queued, {sweep.failed} failed, {sweep.sent} sent")
        if sweep.broker_error:
            raise CommandError(f"{sweep.broker_error}: {sweep.unsent} gradings wait to be sent")
        exports = exports_sweep(resend_after=resend_after)
        self.stdout.write(f"exports: {exports.requeued} re-queued, {exports.failed} failed, {exports.sent} sent")
