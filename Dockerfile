# One image for web (gunicorn) and worker (celery); see docker-compose.yml.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY requirements.lock .
RUN pip install --require-hashes -r requirements.lock
COPY . .
RUN SECRET_KEY=build-only-collectstatic KVP_ENV_FILE= python manage.py collectstatic --no-input
RUN useradd --create-home kvp && mkdir -p /app/var && chown -R kvp /app/var
USER kvp
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "60"]
