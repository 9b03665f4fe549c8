from django.core.management.base import BaseCommand

from webapp.grading.services import gradings_sweep


class Command(BaseCommand):
    help = ("Re-queue gradings stuck in running (their worker was lost) and re-send queued ones "
            "whose message is overdue. The worker's beat runs this periodically as well.")

    def add_arguments(self, parser):
        parser.add_argument("--stuck-after", type=float, help="seconds (default GAGAR_GRADING_STUCK_AFTER)")
        parser.add_argument("--resend-after", type=float, help="seconds (default GAGAR_GRADING_RESEND_AFTER)")

    def handle(self, *args, stuck_after, resend_after, **options):
        sweep = gradings_sweep(stuck_after=stuck_after, resend_after=resend_after)
        self.stdout.write(f"{sweep.requeued} re-queued, {sweep.failed} failed, {sweep.resent} re-sent")
