# One image for every process of the control plane (web, worker, beat, fleet), built from requirements.txt, the
# same pinned list that `make install` uses.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HETEROFLOW_DATA_DIR=/var/lib/heteroflow \
    LOG_FORMAT=json

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
RUN useradd --system --uid 10001 --home-dir /var/lib/heteroflow --create-home heteroflow \
    && rm -f .env
USER heteroflow

EXPOSE 8000
# The web process; docker-compose.yml runs the others from the same image with their own commands.
CMD ["python", "-m", "heteroflow_site.web_workers", "--bind", "0.0.0.0", "--port", "8000", "-v", "0"]
