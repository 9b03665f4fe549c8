from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from webapp.models import Batch


@login_required
def index(request):
    return render(request, "index.html", {"batches": Batch.objects.all()})
