from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('planner', '0005_searchchunk_heartbeat_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='searchchunk',
            name='shapes',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='searchchunk',
            name='cost_bound',
            field=models.FloatField(blank=True, null=True),
        ),
    ]
