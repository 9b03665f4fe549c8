from django.core.management.base import BaseCommand, CommandError

from grading.tiny_model import build_tiny_model


class Command(BaseCommand):
    help = (
        "Write a tiny random-weight causal LM and its tokenizer into PATH, for tests and for "
        "trying the agentic grader without a GPU (its output is nonsense; the loop is real)."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, path, seed, **options):
        try:
            written = build_tiny_model(path, seed=seed)
        except ImportError as error:
            raise CommandError(f"{error}; install the llm extra: make install-llm") from None
        self.stdout.write(f"tiny model written to {written}")
