import csv
import dataclasses
import json

from django.core.management.base import BaseCommand, CommandError

from grading.advantages import SCHEDULES, describe_schedule
from webapp.models import Batch
from webapp.services.advantages import ROW_FIELDS, AdvantageConfig, advantage_rows


class Command(BaseCommand):
    help = "Print one row per trajectory of a batch: GRPO and redistributed advantages."

    def add_arguments(self, parser):
        parser.add_argument("--batch", required=True)
        parser.add_argument("--format", choices=["jsonl", "csv", "table"], default="jsonl")
        parser.add_argument("--schedule", help="weight schedule (default: the batch's config)")
        parser.add_argument("--w-min", type=float, dest="w_min")
        parser.add_argument("--gamma", type=float)
        parser.add_argument("--m", type=int)
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--factors", help="tiered schedule factors, comma-separated")
        parser.add_argument("--no-std", action="store_true", help="Dr. GRPO: do not divide by std")
        parser.add_argument("--population-std", action="store_true", help="std with ddof=0")

    def handle(self, *args, batch, format, **options):
        try:
            batch = Batch.objects.get(name=batch)
        except Batch.DoesNotExist:
            raise CommandError(f"no batch named {batch!r}") from None
        config = self._config(batch, options)
        rows = advantage_rows(batch, config)
        if format == "jsonl":
            for row in rows:
                self.stdout.write(json.dumps(row))
        elif format == "csv":
            writer = csv.DictWriter(self.stdout, fieldnames=ROW_FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows({**row, "flags": ";".join(row["flags"])} for row in rows)
        else:
            self._table(rows)

    def _config(self, batch, options):
        config = AdvantageConfig.from_dict(batch.advantage_config)
        schedule = options["schedule"] or config.schedule
        given = {
            key: options[key]
            for key in ("w_min", "gamma", "m", "temperature")
            if options[key] is not None
        }
        if options["factors"]:
            given["factors"] = [float(f) for f in options["factors"].split(",")]
        params = given if options["schedule"] and options["schedule"] != config.schedule else {
            **config.params, **given
        }
        try:
            params = describe_schedule(schedule, params)["params"]
        except ValueError as error:
            raise CommandError(f"{error} (known schedules: {', '.join(sorted(SCHEDULES))})") from None
        return dataclasses.replace(
            config,
            schedule=schedule,
            params=params,
            norm_by_std=config.norm_by_std and not options["no_std"],
            unbiased_std=config.unbiased_std and not options["population_std"],
        )

    def _table(self, rows):
        self.stdout.write(
            f"{'group':<28} {'traj':<10} {'rew':>4} {'label':<9} {'grpo':>8} {'factor':>6} {'rank':>4} "
            f"{'adv':>8} source"
        )
        for r in rows:
            factor = "" if r["factor"] is None else f"{r['factor']:.3f}"
            self.stdout.write(
                f"{r['group_id'][:28]:<28} {r['trajectory_id'][:10]:<10} {r['reward']:>4.1f} "
                f"{r['label']:<9} {r['grpo_advantage']:>8.4f} {factor:>6} {r['rank'] or '':>4} "
                f"{r['advantage']:>8.4f} {r['source']}"
            )
